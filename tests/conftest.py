import os
from pathlib import Path

import pytest

pytest_plugins = ["tests.reliability.report"]


@pytest.fixture
def settings_env(tmp_path, monkeypatch):
    """Point the data directory at a temporary folder."""
    monkeypatch.setenv("VNX_DATA_DIR", str(tmp_path / "data"))
    return tmp_path


@pytest.fixture(scope="session")
def model_cache_dir() -> Path:
    """Where trained project models are cached across tests (shared with `make demo`)."""
    base = Path(os.environ.get("VNX_DATA_DIR", ".vnx/data"))
    return base / "models"
