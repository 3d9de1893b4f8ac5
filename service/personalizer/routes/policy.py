"""Personalizer's learning policy: ``GET``/``PUT``/``PATCH``/``DELETE
/configurations/policy`` (the work is in :mod:`service.personalizer.policy`)."""

from __future__ import annotations

from service.api.deps import LogDep, SettingsDep, StoreDep
from service.personalizer import policy
from service.personalizer.errors import bad
from service.personalizer.routes.common import admin_router, responses
from service.personalizer.schemas import PolicyContract

__all__ = ["router"]

router = admin_router()


def _answer(doc: dict) -> PolicyContract:
    return PolicyContract(name=doc["name"], arguments=doc["arguments"])


@router.get("/configurations/policy", response_model=PolicyContract, responses=responses(),
            response_description="The policy in force.")
def get_policy(log: LogDep, settings: SettingsDep) -> PolicyContract:
    """The learning policy in force: the stored one, or the default the settings give
    (`personalizer_booster`, `personalizer_params`)."""
    return _answer(policy.current(log, settings))


@router.put("/configurations/policy", response_model=PolicyContract, responses=responses(400),
            response_description="The policy now in force.")
@router.patch("/configurations/policy", response_model=PolicyContract,
              responses=responses(400), response_description="The policy now in force.")
def update_policy(body: PolicyContract, log: LogDep, store: StoreDep,
                  settings: SettingsDep) -> PolicyContract:
    """Set the learning policy: `arguments` are `--booster NAME --<parameter> <value> ...`,
    checked by building the booster. The endpoint's models are renewed: retrained from the
    retained log with the new booster and parameters."""
    try:
        doc = policy.make_policy(body.name, body.arguments, settings,
                                 policy.action_counts(log, settings))
    except ValueError as exc:
        raise bad("InvalidPolicyConfiguration", f"arguments: {exc}") from None
    return _answer(policy.set_policy(log, store, settings, doc))


@router.delete("/configurations/policy", response_model=PolicyContract, responses=responses(),
               response_description="The default policy, now in force.")
def reset_policy(log: LogDep, store: StoreDep, settings: SettingsDep) -> PolicyContract:
    """Back to the default policy (the models are renewed if that changes them)."""
    return _answer(policy.set_policy(log, store, settings, None))
