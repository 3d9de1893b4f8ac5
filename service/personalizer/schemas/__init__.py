"""Request and response bodies of the Personalizer-compatible routes, with Personalizer's field
names and shapes (v1.0 and v1.1-preview.1 REST APIs); one module per area. Docstrings and
descriptions end up in the OpenAPI document, so they are written in Markdown.

- :mod:`~service.personalizer.schemas.common`: the base class, the error envelope.
- :mod:`~service.personalizer.schemas.events`: rank and reward.
- :mod:`~service.personalizer.schemas.logs`: the log's properties.
- :mod:`~service.personalizer.schemas.model`: model properties, feature importances.
- :mod:`~service.personalizer.schemas.multislot`: multi-slot rank and reward.
- :mod:`~service.personalizer.schemas.evaluations`: the policy and the offline evaluations.
"""

from service.personalizer.schemas.common import (
    ERROR_RESPONSES,
    PersonalizerBody,
    PersonalizerError,
    PersonalizerErrorBody,
)
from service.personalizer.schemas.evaluations import (
    Evaluation,
    EvaluationContract,
    EvaluationList,
    PolicyContract,
    PolicyReferenceContract,
)
from service.personalizer.schemas.events import (
    RankableAction,
    RankedAction,
    RankRequest,
    RankResponse,
    RewardRequest,
)
from service.personalizer.schemas.logs import DateRange, LogsProperties
from service.personalizer.schemas.model import (
    FeatureImportance,
    FeatureImportanceList,
    FeatureImportanceRequest,
    FeatureImportanceSummary,
    FeatureScore,
    ModelProperties,
)
from service.personalizer.schemas.multislot import (
    MultiSlotRankRequest,
    MultiSlotRankResponse,
    MultiSlotRewardRequest,
    SlotRequest,
    SlotResponse,
    SlotReward,
)

__all__ = [
    "ERROR_RESPONSES",
    "DateRange",
    "FeatureImportance",
    "FeatureImportanceList",
    "FeatureImportanceRequest",
    "FeatureImportanceSummary",
    "FeatureScore",
    "LogsProperties",
    "ModelProperties",
    "MultiSlotRankRequest",
    "MultiSlotRankResponse",
    "MultiSlotRewardRequest",
    "Evaluation",
    "EvaluationContract",
    "EvaluationList",
    "PersonalizerBody",
    "PersonalizerError",
    "PersonalizerErrorBody",
    "PolicyContract",
    "PolicyReferenceContract",
    "RankRequest",
    "RankResponse",
    "RankableAction",
    "RankedAction",
    "RewardRequest",
    "SlotRequest",
    "SlotResponse",
    "SlotReward",
]
