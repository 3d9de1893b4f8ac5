"""The model file of the Personalizer endpoint (``GET``/``PUT /personalizer/model``): a zip of
a JSON manifest and each model's snapshot, optionally signed with HMAC-SHA256. Pure: bytes in,
bytes out (docs/personalizer.md, "Model, logs and feature importances", describes the format).

A file is read back (:func:`unpack`) only if its signature verifies against the server's key:
its pickles were then written by a server holding that key, and only then are they handed on
to be unpickled. Nothing of an unverified file but its manifest and signature is read.

>>> entry = ModelEntry({"name": "pz-1", "uid": "u1"}, 3, "5-0", b"whole", b"serving")
>>> signed = pack([entry], key=b"k" * 16, created=0.0)
>>> unpack(signed, key=b"k" * 16) == [entry]
True
>>> unpack(signed, key=b"x" * 16)
Traceback (most recent call last):
service.personalizer.modelfile.ModelFileError: InvalidModelSignature: the file's signature \
does not verify with this server's personalizer_model_signing_key (tampered, or signed by \
another server)
>>> unpack(pack([entry], key=None, created=0.0), key=b"k" * 16)  # doctest: +ELLIPSIS
Traceback (most recent call last):
service.personalizer.modelfile.ModelFileError: ModelFileNotSigned: ...
>>> other = io.BytesIO()
>>> with zipfile.ZipFile(other, "w") as z:
...     z.writestr("model.vw", b"weights")
>>> unpack(other.getvalue(), key=b"k" * 16)  # doctest: +ELLIPSIS
Traceback (most recent call last):
service.personalizer.modelfile.ModelFileError: InvalidModelFile: the archive has no ...
"""

from __future__ import annotations

import hashlib
import hmac
import io
import json
import zipfile
from dataclasses import dataclass, field
from typing import Any

from service.events import iso_timestamp

__all__ = ["FORMAT", "FORMAT_VERSION", "ModelEntry", "ModelFileError", "pack", "unpack"]

FORMAT = "boostbandit-personalizer-model"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
SIGNATURE = "signature.json"
#: the largest manifest or signature read from a file (before anything is verified)
MAX_HEADER_BYTES = 1 << 20


class ModelFileError(ValueError):
    """A model file that cannot be imported; ``code`` is the error code answered."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code, self.message = code, message


@dataclass(frozen=True)
class ModelEntry:
    """One model of a file: its stored config (a dict), the number of joined events its
    booster applied, the joined id it stood at, the pickles of its booster and serving copy,
    and the types of the features it has seen (feature name -> ``n`` number, ``s`` string)."""

    config: dict[str, Any]
    version: int
    joined_id: str
    blob: bytes
    serving: bytes
    feature_types: dict[str, str] = field(default_factory=dict)

    @property
    def name(self) -> str:
        """The model name."""
        return str(self.config["name"])


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _manifest(entries: list[ModelEntry], created: float) -> bytes:
    models = []
    for e in entries:
        base = f"models/{e.name}"
        models.append({
            "name": e.name, "uid": e.config.get("uid"), "version": e.version,
            "joinedId": e.joined_id, "config": e.config, "featureTypes": e.feature_types,
            "booster": {"path": f"{base}/booster.pkl", "bytes": len(e.blob),
                        "sha256": _sha256(e.blob)},
            "serving": {"path": f"{base}/serving.pkl", "bytes": len(e.serving),
                        "sha256": _sha256(e.serving)},
        })
    doc = {"format": FORMAT, "formatVersion": FORMAT_VERSION, "created": iso_timestamp(created),
           "models": models}
    return json.dumps(doc, indent=1, sort_keys=True).encode()


def _hmac(key: bytes, manifest: bytes) -> str:
    return hmac.new(key, manifest, hashlib.sha256).hexdigest()


def pack(entries: list[ModelEntry], key: bytes | None, created: float) -> bytes:
    """The file of ``entries``, signed with ``key`` (None: unsigned)."""
    manifest = _manifest(entries, created)
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as z:
        z.writestr(MANIFEST, manifest)
        for e, m in zip(entries, json.loads(manifest)["models"], strict=True):
            z.writestr(m["booster"]["path"], e.blob)
            z.writestr(m["serving"]["path"], e.serving)
        if key is not None:
            z.writestr(SIGNATURE, json.dumps({"algorithm": "HMAC-SHA256", "signs": MANIFEST,
                                              "hmac": _hmac(key, manifest)}))
    return out.getvalue()


def _read(z: zipfile.ZipFile, name: str, size: int | None = None) -> bytes:
    """Entry ``name``, refused unless it is at most :data:`MAX_HEADER_BYTES` (or, with
    ``size``, exactly ``size`` bytes) uncompressed: nothing larger is ever decompressed."""
    try:
        info = z.getinfo(name)
    except KeyError:
        raise ModelFileError("InvalidModelFile", f"the file has no {name}") from None
    if (info.file_size != size) if size is not None else info.file_size > MAX_HEADER_BYTES:
        raise ModelFileError("InvalidModelFile", f"{name}: unexpected size {info.file_size}")
    return z.read(info)


def _verified_manifest(z: zipfile.ZipFile, key: bytes) -> dict[str, Any]:
    names = set(z.namelist())
    if MANIFEST not in names:  # e.g. a model file of Azure Personalizer or Vowpal Wabbit
        raise ModelFileError("InvalidModelFile", f"the archive has no {MANIFEST}: not a model "
                             "file exported by GET /personalizer/model")
    if SIGNATURE not in names:
        raise ModelFileError("ModelFileNotSigned",
                             "the file is not signed: export it with ?signed=true from a server "
                             "with the same personalizer_model_signing_key")
    manifest = _read(z, MANIFEST)
    try:
        signature = json.loads(_read(z, SIGNATURE))
        given = str(signature["hmac"])
    except (ValueError, KeyError, TypeError):
        raise ModelFileError("InvalidModelFile", f"{SIGNATURE} is not valid") from None
    if signature.get("algorithm") != "HMAC-SHA256" or not hmac.compare_digest(
            given, _hmac(key, manifest)):
        raise ModelFileError("InvalidModelSignature",
                             "the file's signature does not verify with this server's "
                             "personalizer_model_signing_key (tampered, or signed by another "
                             "server)")
    doc = json.loads(manifest)
    if doc.get("format") != FORMAT or doc.get("formatVersion") != FORMAT_VERSION:
        raise ModelFileError("InvalidModelFile",
                             f"unsupported format {doc.get('format')!r} version "
                             f"{doc.get('formatVersion')!r} (expected {FORMAT} {FORMAT_VERSION})")
    return doc


def _blob(z: zipfile.ZipFile, part: dict[str, Any]) -> bytes:
    data = _read(z, part["path"], size=int(part["bytes"]))
    if not hmac.compare_digest(_sha256(data), part["sha256"]):
        raise ModelFileError("InvalidModelSignature", f"{part['path']} does not match the "
                             "signed manifest (tampered)")
    return data


def unpack(data: bytes, key: bytes) -> list[ModelEntry]:
    """The models of a file signed with ``key``, or :class:`ModelFileError` naming why not
    (not a model file, not signed, a signature or a content that does not verify)."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            doc = _verified_manifest(z, key)
            return [ModelEntry(m["config"], int(m["version"]), str(m["joinedId"]),
                               _blob(z, m["booster"]), _blob(z, m["serving"]),
                               dict(m.get("featureTypes") or {}))
                    for m in doc["models"]]
    except ModelFileError:
        raise
    except Exception:  # noqa: BLE001 - an untrusted archive fails in many ways (an encrypted
        # entry: RuntimeError; a corrupt one: BadZipFile, zlib.error, EOFError, ...): all 400
        raise ModelFileError("InvalidModelFile", "the body is not a model file (a zip "
                             "archive exported by GET /personalizer/model)") from None
