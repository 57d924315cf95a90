"""Multi-aspect query generation (Multi-Head RAG benchmark construction, Besta et al.).

* :mod:`.sampling` - which documents (of distinct categories) each query covers;
* :mod:`.story_prompt` - the paper's story prompt and the fusion sub-query prompt;
* :mod:`.checks` - title-coverage check and line-list cleaning of LLM output;
* :mod:`.offline` - deterministic LLM-free story composer;
* :mod:`.generate` - LLM/offline generation with statuses, concurrency and resume.
"""

from __future__ import annotations

from services.querygen.checks import clean_subqueries, dedupe, missing_titles, normalize
from services.querygen.generate import (
    FUSION_FAILED,
    FUSION_NOT_MADE,
    FusionRepair,
    GeneratedQuery,
    ask_fusion_again,
    fusion_request_failed,
    generate_queries,
    regenerate_one,
)
from services.querygen.offline import GENERATOR_NAME as OFFLINE_GENERATOR
from services.querygen.offline import OfflineStory, compose_story
from services.querygen.sampling import DocRef, PlanList, QueryPlan, SamplingError, plan_queries
from services.querygen.story_prompt import Article, fusion_messages, story_messages, story_prompt

__all__ = [
    "FUSION_FAILED",
    "FUSION_NOT_MADE",
    "OFFLINE_GENERATOR",
    "Article",
    "DocRef",
    "FusionRepair",
    "GeneratedQuery",
    "OfflineStory",
    "PlanList",
    "QueryPlan",
    "SamplingError",
    "ask_fusion_again",
    "clean_subqueries",
    "compose_story",
    "dedupe",
    "fusion_messages",
    "fusion_request_failed",
    "generate_queries",
    "missing_titles",
    "normalize",
    "plan_queries",
    "regenerate_one",
    "story_messages",
    "story_prompt",
]
