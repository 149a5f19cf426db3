"""The benchmarks' /proc readings against the real local broker: its JVM is found, and its JIT
compiler threads are seen (a broker that has started has compiled its start-up paths)."""

from vidnexus.benchmarks.procstat import broker_pid, compiler_cpu_s, cpu_s


def test_the_local_broker_and_its_jit_compilers_are_found(kafka_bootstrap):
    pid = broker_pid(kafka_bootstrap)
    assert pid is not None, f"no kafka.Kafka JVM found for {kafka_bootstrap}"
    jit = compiler_cpu_s(pid)
    assert 0 < jit <= cpu_s(pid)


def test_a_remote_broker_has_no_local_pid():
    assert broker_pid("kafka.example.org:9092") is None
