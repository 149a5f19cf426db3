"""The benchmarks' /proc readings against the real local broker: its JVM is found, and its JIT
compiler threads are seen (a broker that has started has compiled its start-up paths)."""

import os

from vidnexus.benchmarks.procstat import broker_pid, compiler_cpu_s, cpu_s, listening_inodes, socket_tables


def test_the_local_broker_and_its_jit_compilers_are_found(kafka_bootstrap):
    pid = broker_pid(kafka_bootstrap)
    assert pid is not None, f"no kafka.Kafka JVM found for {kafka_bootstrap}"
    jit = compiler_cpu_s(pid)
    assert 0 < jit <= cpu_s(pid)


def test_the_broker_found_is_the_one_listening_on_the_bootstrap_port(kafka_bootstrap):
    pid = broker_pid(kafka_bootstrap)
    port = int(kafka_bootstrap.split(",")[0].rsplit(":", 1)[1])
    inodes = listening_inodes(socket_tables(), port)
    assert inodes, f"nothing listens on {port}"
    held = {os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")}
    assert {f"socket:[{i}]" for i in inodes} & held
    # A loopback port no broker listens on has none, though a kafka.Kafka JVM runs here.
    assert broker_pid("127.0.0.1:1") is None


def test_a_remote_broker_has_no_local_pid():
    assert broker_pid("kafka.example.org:9092") is None
