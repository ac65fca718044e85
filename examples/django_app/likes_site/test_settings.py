"""Settings for the tests: moto's in-process DynamoDB, whatever the environment says."""
from __future__ import annotations

from .settings import *  # noqa: F403
from .settings import LIKES

LIKES = {**LIKES, "TABLE": "LikesTest", "HOST": None, "REGION": "us-east-1", "DUPLICATE_LIKE_STATUS": 409}
