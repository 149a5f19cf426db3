"""A ClickHouse server from Debian's ``clickhouse-server`` package, with our own configuration."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from vidnexus.config import Settings
from vidnexus.errors import ServiceError
from vidnexus.services.base import LocalService, run_checked

__all__ = ["ClickHouseService", "ensure_apt_packages"]

_PACKAGES = ["clickhouse-server", "clickhouse-client"]


def ensure_apt_packages(packages: list[str], binary: str) -> None:
    """Install Debian packages if ``binary`` is missing; fail loudly with apt's reason."""
    if shutil.which(binary) or Path("/usr/sbin", binary).exists():
        return
    if shutil.which("apt-get") is None:
        raise ServiceError(
            f"`{binary}` is not installed and this system has no apt-get; "
            f"install {' '.join(packages)} with your package manager"
        )
    sudo: list[str] = []
    if os.geteuid() != 0:
        if shutil.which("sudo") is None:
            raise ServiceError(f"`{binary}` is missing and installing {packages} needs root (no sudo)")
        sudo = ["sudo", "-n"]
    env_cmd = ["env", "DEBIAN_FRONTEND=noninteractive"]
    policy = subprocess.run(
        ["apt-cache", "policy", packages[0]], capture_output=True, text=True
    ).stdout
    if "Candidate: (none)" in policy or "Candidate:" not in policy:
        run_checked([*sudo, "apt-get", "update", "-q"], "apt-get update")
    run_checked(
        [*sudo, *env_cmd, "apt-get", "install", "-y", "-q", "--no-install-recommends", *packages],
        f"installing {' '.join(packages)} with apt-get",
    )


_CONFIG = """<?xml version="1.0"?>
<!-- Written by vidnexus (vidnexus/services/clickhouse.py); regenerated at every start. -->
<yandex>
    <logger>
        <level>warning</level>
        <log>{home}/log/server.log</log>
        <errorlog>{home}/log/server.err.log</errorlog>
        <size>100M</size>
        <count>2</count>
    </logger>
    <http_port>{http_port}</http_port>
    <tcp_port>{tcp_port}</tcp_port>
    <listen_host>127.0.0.1</listen_host>
    <max_connections>256</max_connections>
    <keep_alive_timeout>3</keep_alive_timeout>
    <max_concurrent_queries>64</max_concurrent_queries>
    <uncompressed_cache_size>268435456</uncompressed_cache_size>
    <mark_cache_size>268435456</mark_cache_size>
    <path>{home}/data/</path>
    <tmp_path>{home}/tmp/</tmp_path>
    <user_files_path>{home}/user_files/</user_files_path>
    <format_schema_path>{home}/format_schemas/</format_schema_path>
    <users_config>users.xml</users_config>
    <default_profile>default</default_profile>
    <default_database>default</default_database>
    <timezone>UTC</timezone>
    <mlock_executable>false</mlock_executable>
    <max_session_timeout>3600</max_session_timeout>
    <default_session_timeout>60</default_session_timeout>
</yandex>
"""

_USERS = """<?xml version="1.0"?>
<yandex>
    <profiles>
        <default><max_memory_usage>4000000000</max_memory_usage></default>
        <readonly><readonly>1</readonly></readonly>
        <!-- The read-only SQL of `vidnexus sql` and `sql-server`: readonly=1 refuses writes, DDL, SET
             and every table function in the engine itself; a readonly=1 user's own settings are
             ignored by 18.16, so its limits live here. -->
        <vnx_reader>
            <readonly>1</readonly>
            <max_execution_time>30</max_execution_time>
            <max_memory_usage>2000000000</max_memory_usage>
            <max_result_bytes>268435456</max_result_bytes>
            <result_overflow_mode>break</result_overflow_mode>
        </vnx_reader>
    </profiles>
    <users>
        <default>
            <password></password>
            <networks><ip>127.0.0.1</ip><ip>::1</ip></networks>
            <profile>default</profile>
            <quota>default</quota>
        </default>
        <vnx_reader>
            <password></password>
            <networks><ip>127.0.0.1</ip><ip>::1</ip></networks>
            <profile>vnx_reader</profile>
            <quota>default</quota>
            <allow_databases><database>default</database></allow_databases>
        </vnx_reader>
    </users>
    <quotas>
        <default><interval><duration>3600</duration><queries>0</queries><errors>0</errors>
        <result_rows>0</result_rows><read_rows>0</read_rows><execution_time>0</execution_time>
        </interval></default>
    </quotas>
</yandex>
"""


class ClickHouseService(LocalService):
    """ClickHouse on 127.0.0.1 (native ``clickhouse_tcp_port``, HTTP ``clickhouse_http_port``)."""

    name = "clickhouse"

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings.work_dir / "clickhouse", settings.clickhouse_tcp_port)
        self.http_port = settings.clickhouse_http_port

    def _binary(self) -> str:
        return shutil.which("clickhouse-server") or "/usr/sbin/clickhouse-server"

    def install(self) -> None:
        ensure_apt_packages(_PACKAGES, "clickhouse-server")

    def command(self) -> list[str]:
        for sub in ("log", "data", "tmp", "user_files", "format_schemas"):
            (self.home / sub).mkdir(parents=True, exist_ok=True)
        cfg = self.home / "config.xml"
        cfg.write_text(
            _CONFIG.format(home=self.home, http_port=self.http_port, tcp_port=self.port)
        )
        (self.home / "users.xml").write_text(_USERS)
        return [self._binary(), f"--config-file={cfg}"]

    def log_for_errors(self) -> Path:
        err = self.home / "log" / "server.err.log"
        return err if err.exists() and err.stat().st_size else self.log_file

    def ready(self) -> bool:
        if not super().ready():
            return False
        try:
            from clickhouse_driver import Client

            Client(host=self.host, port=self.port, connect_timeout=1).execute("SELECT 1")
            return True
        except Exception:
            return False
