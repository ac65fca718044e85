"""The two lines of ``conftest.py`` a user's suite needs for the plugin (with :file:`plugin_models.py` as
``app_models``)."""
import pytest
from app_models import Post

counters_models = pytest.fixture(lambda: [Post])
