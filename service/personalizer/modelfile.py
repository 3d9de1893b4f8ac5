"""The model file of the Personalizer endpoint (``GET``/``PUT /personalizer/model``): a zip of
a JSON manifest and each model's booster as data (:mod:`service.models.modeldata`: a JSON tree
and the bytes of its numeric arrays, never a pickle), optionally signed with HMAC-SHA256. Pure:
bytes in, bytes out (docs/personalizer.md, "Model, logs and feature importances", describes the
format).

A file is read back (:func:`unpack`) only if its signature verifies against the server's key;
nothing of an unverified file but its manifest and signature is read. Reading a booster never
runs code named by the file, even with the key: its data names only allow-listed classes. Files
of version 1 held pickles: :func:`unpack` refuses them unless ``allow_pickle`` (the setting
``personalizer_model_allow_pickle``), and then they are read with the allow-listed unpickler.

>>> entry = ModelEntry({"name": "pz-1", "uid": "u1"}, 3, "5-0", b"booster data")
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

__all__ = ["DATA", "FORMAT", "FORMAT_VERSION", "PICKLE", "ModelEntry", "ModelFileError", "pack",
           "unpack"]

FORMAT = "boostbandit-personalizer-model"
FORMAT_VERSION = 2
#: the encodings of a booster: model data (:mod:`service.models.modeldata`), or a pickle (version 1)
DATA, PICKLE = "boostbandit-data 1", "pickle"
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
    booster applied, the joined id it stood at, its booster in ``encoding`` (:data:`DATA`, or
    :data:`PICKLE` in a file of version 1), and the types of the features it has seen
    (feature name -> ``n`` number, ``s`` string)."""

    config: dict[str, Any]
    version: int
    joined_id: str
    booster: bytes
    feature_types: dict[str, str] = field(default_factory=dict)
    encoding: str = DATA

    @property
    def name(self) -> str:
        """The model name."""
        return str(self.config["name"])


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _manifest(entries: list[ModelEntry], created: float) -> bytes:
    models = []
    for e in entries:
        if e.encoding != DATA:
            raise ValueError(f"model {e.name!r}: only {DATA} is written, not {e.encoding}")
        models.append({
            "name": e.name, "uid": e.config.get("uid"), "version": e.version,
            "joinedId": e.joined_id, "config": e.config, "featureTypes": e.feature_types,
            "booster": {"path": f"models/{e.name}/booster.data", "encoding": DATA,
                        "bytes": len(e.booster), "sha256": _sha256(e.booster)},
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
            z.writestr(m["booster"]["path"], e.booster)
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
    if doc.get("format") != FORMAT or doc.get("formatVersion") not in (1, FORMAT_VERSION):
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


def _encoding(doc: dict[str, Any], part: dict[str, Any], allow_pickle: bool) -> str:
    """The encoding of a booster: model data; a pickle (version 1) only with ``allow_pickle``."""
    if doc["formatVersion"] == 1:
        if not allow_pickle:
            raise ModelFileError(
                "PickledModelFileNotAllowed",
                "the file is of version 1, whose boosters are pickles: export it again from "
                "a server of this version, or import it with the setting "
                "personalizer_model_allow_pickle=true (BOOSTBANDIT_PERSONALIZER_MODEL_ALLOW_"
                "PICKLE; read with the allow-listed unpickler)")
        return PICKLE
    if part.get("encoding") != DATA:
        raise ModelFileError("InvalidModelFile", f"{part['path']}: unknown encoding "
                             f"{part.get('encoding')!r} (expected {DATA!r})")
    return DATA


def _entry(z: zipfile.ZipFile, doc: dict[str, Any], m: dict[str, Any],
           allow_pickle: bool) -> ModelEntry:
    encoding = _encoding(doc, m["booster"], allow_pickle)
    return ModelEntry(m["config"], int(m["version"]), str(m["joinedId"]),
                      _blob(z, m["booster"]), dict(m.get("featureTypes") or {}), encoding)


def unpack(data: bytes, key: bytes, allow_pickle: bool = False) -> list[ModelEntry]:
    """The models of a file signed with ``key``, or :class:`ModelFileError` naming why not
    (not a model file, not signed, a signature or a content that does not verify, a file of
    version 1 without ``allow_pickle``). A version-1 file's serving copies are not read: they
    are made again from the boosters."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            doc = _verified_manifest(z, key)
            return [_entry(z, doc, m, allow_pickle) for m in doc["models"]]
    except ModelFileError:
        raise
    except Exception:  # noqa: BLE001 - an untrusted archive fails in many ways (an encrypted
        # entry: RuntimeError; a corrupt one: BadZipFile, zlib.error, EOFError, ...): all 400
        raise ModelFileError("InvalidModelFile", "the body is not a model file (a zip "
                             "archive exported by GET /personalizer/model)") from None
