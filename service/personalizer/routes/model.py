"""The endpoint's models as a file: export (``GET /model``, signed with ``?signed=true``),
import of a signed file (``PUT /model``), reset to fresh models (``DELETE /model``) and
``GET /model/properties`` (the work is in :mod:`service.personalizer.models`)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Body, Query, Response, status

from service.api.deps import LogDep, SettingsDep, StoreDep
from service.personalizer import models
from service.personalizer.routes.common import admin_router, responses
from service.personalizer.schemas import ModelProperties, PersonalizerError

__all__ = ["router"]

router = admin_router()

FILE_NAME = "boostbandit-personalizer-model.zip"

#: a model changed between the read and the write of an import or reset (nothing of it written)
CHANGED = {409: {"model": PersonalizerError, "description": "A model changed meanwhile "
                 "(another import, reset or configuration change; `Conflict`): retry."}}


@router.get(
    "/model",
    response_class=Response,
    response_description="The model file (a zip: docs/personalizer.md, \"Model, logs and "
    "feature importances\").",
    responses={200: {"content": {"application/octet-stream": {}}}, **responses(400)},
)
def export_model(log: LogDep, store: StoreDep, settings: SettingsDep,
                 signed: Annotated[bool, Query(description="Sign the file with the server's "
                                               "`personalizer_model_signing_key` (400 without "
                                               "one); only signed files can be imported.")]
                 = False) -> Response:
    """Every model of the endpoint as one file: a JSON manifest (each model's config,
    version, uid and joined id) and each model's snapshot, as this process decides with it."""
    data = models.export(log, store, settings, signed)
    return Response(data, media_type="application/octet-stream",
                    headers={"Content-Disposition": f'attachment; filename="{FILE_NAME}"'})


@router.put(
    "/model",
    status_code=status.HTTP_204_NO_CONTENT,
    response_description="Imported: the file's models replace the endpoint's models of the "
    "same names.",
    responses={**responses(400), **CHANGED},
)
def import_model(log: LogDep, store: StoreDep, settings: SettingsDep,
                 body: Annotated[bytes, Body(media_type="application/octet-stream",
                                             description="A file of `GET /model?signed=true`.")],
                 ) -> Response:
    """Import a model file signed with this server's `personalizer_model_signing_key`
    (exported with `?signed=true` by a server holding the same key). Anything else is refused
    with 400 before a byte of its models is read: an unsigned file (`ModelFileNotSigned`), a
    signature or content that does not verify (`InvalidModelSignature`), not a model file
    (`InvalidModelFile`), no key configured (`ModelSigningKeyNotSet`). Each imported model
    gets a new uid, starts from the file's state and learns what is joined from now on. 409
    `Conflict` if a model changed while the file was imported: that model is left as it was
    changed (models imported before it stay imported); retry."""
    models.import_file(log, store, settings, body)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.delete(
    "/model",
    status_code=status.HTTP_204_NO_CONTENT,
    response_description="Every model of the endpoint was reset.",
    responses={**responses(), **CHANGED},
)
def reset_model(log: LogDep, store: StoreDep, settings: SettingsDep) -> Response:
    """Reset every model of the endpoint to a fresh model (same configuration and seed, a new
    uid, version 0) that learns only the events joined from now on; the log is kept. 409
    `Conflict` if a model changed meanwhile (nothing of it reset); retry."""
    models.reset(log, store, settings)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.get(
    "/model/properties",
    response_model=ModelProperties,
    response_model_exclude_none=True,
    responses=responses(),
)
def model_properties(log: LogDep, store: StoreDep, settings: SettingsDep) -> ModelProperties:
    """When the endpoint's newest model was created (or reset, or imported) and when a model
    last changed."""
    return ModelProperties(**models.properties(log, store, settings))
