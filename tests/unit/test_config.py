import pytest

from vidnexus.config import Settings, load_settings
from vidnexus.errors import ConfigError


def test_env_prefix(monkeypatch):
    monkeypatch.setenv("VNX_BUS", "kafka")
    monkeypatch.setenv("VNX_TOPIC_PREFIX", "prod")
    s = load_settings()
    assert s.bus == "kafka" and s.topic_prefix == "prod"


def test_overrides_beat_env(monkeypatch):
    monkeypatch.setenv("VNX_STORE", "clickhouse")
    assert load_settings(store="chdb").store == "chdb"


@pytest.mark.parametrize("var, value", [("VNX_BUS", "rabbit"), ("VNX_CONNECT_TIMEOUT_S", "-1"),
                                        ("VNX_TOPIC_PREFIX", "bad prefix!"), ("VNX_KAFKA_LINGER_MS", "-0.5"),
                                        ("VNX_KAFKA_LINGER_MS", "soon")])
def test_invalid_values_name_the_variable(monkeypatch, var, value):
    monkeypatch.setenv(var, value)
    with pytest.raises(ConfigError, match=var):
        load_settings()


def test_unknown_fields_are_refused():
    with pytest.raises(Exception):
        Settings(nope=1)


def test_every_field_is_documented():
    assert all(f.description for f in Settings.model_fields.values())
