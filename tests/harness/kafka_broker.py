"""A real single-node Apache Kafka broker (KRaft, combined broker+controller) for tests.

Why a real broker: the code under test speaks the Kafka protocol through aiokafka, and fakes
drift from what a broker really does (group rebalances, commits, compaction, admin errors).
Why from Maven Central: it is the one place (besides PyPI) this project's machines and CI can
download from, so the broker's jars come from there via the machine's `mvn`, once, into a
cache outside the repo.

Usage::

    with KafkaBroker.start(tmp_path) as broker:
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap)

CLI::

    python -m tests.harness.kafka_broker fetch   # download the jars (first run only)
    python -m tests.harness.kafka_broker run     # start a broker, print its address, Ctrl-C
"""

from __future__ import annotations

import argparse
import atexit
import base64
import contextlib
import fcntl
import hashlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType

POM = Path(__file__).resolve().parent / "kafka" / "pom.xml"
CACHE_DIR = Path(
    os.environ.get("EVENTFLOW_KAFKA_CACHE") or Path.home() / ".cache" / "eventflow" / "kafka"
)
HOST = "127.0.0.1"
MARKER = ".fetched"
READY_LINE = "Kafka Server started"
START_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 20.0
PORT_ATTEMPTS = 3
LOG_TAIL_LINES = 40

# A test broker handles a trickle of traffic: a small heap, a serial GC and the C1 compiler
# only, so that it starts sooner and leaves the CPU of a 2-core machine to the tests.
JVM_OPTS = (
    "-Xms128m",
    "-Xmx512m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-XX:+ExitOnOutOfMemoryError",
    "-XX:-UsePerfData",
    "-Djava.awt.headless=true",
)

# What Kafka's own start scripts run a broker with (kafka-server-start.sh's 1 GiB heap,
# kafka-run-class.sh's performance options): for measuring, where the broker should be the
# one a deployment runs, not one tuned to start fast.
PRODUCTION_JVM_OPTS = (
    "-Xms1g",
    "-Xmx1g",
    "-server",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-XX:+ExitOnOutOfMemoryError",
    "-Djava.awt.headless=true",
)

# Without a config, log4j2 logs only errors, and the line we wait for is at INFO.
LOG4J2_PROPERTIES = """\
status = warn
# Kafka logs its own shutdown from a JVM hook; log4j2's hook would go deaf before it ends.
shutdownHook = disable
appender.out.type = Console
appender.out.name = out
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = info
rootLogger.appenderRef.out.ref = out
"""


class KafkaHarnessError(RuntimeError):
    """The jars could not be fetched, or the broker did not come up."""


class _PortTaken(KafkaHarnessError):
    """Another process grabbed a port between our pick and the broker's bind; retry."""


# --------------------------------------------------------------------------- fetching


def kafka_version() -> str:
    """The Kafka version, read from the pom so that there is a single place to bump it."""
    ns = {"m": "http://maven.apache.org/POM/4.0.0"}
    version = ET.parse(POM).getroot().findtext("m:properties/m:kafka.version", namespaces=ns)
    if not version:
        raise KafkaHarnessError(f"no <kafka.version> property in {POM}")
    return version


def libs_dir(cache_dir: Path = CACHE_DIR) -> Path:
    """Where the jars for the current pom live; a pom edit gets a fresh directory."""
    digest = hashlib.sha256(POM.read_bytes()).hexdigest()[:10]
    return cache_dir / f"kafka-{kafka_version()}-{digest}" / "libs"


def fetch(cache_dir: Path = CACHE_DIR) -> Path:
    """Return the directory of the broker's jars, downloading them on first use only.

    A file lock makes parallel test processes wait for one download instead of racing
    two Maven runs over the same local repository.
    """
    libs = libs_dir(cache_dir)
    if (libs / MARKER).is_file():
        return libs
    cache_dir.mkdir(parents=True, exist_ok=True)
    with _file_lock(cache_dir / ".fetch.lock"):
        if not (libs / MARKER).is_file():
            _download(cache_dir, libs)
    return libs


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _download(cache_dir: Path, libs: Path) -> None:
    """Run Maven into a scratch directory and move it into place only once it is complete,
    so an interrupted download never looks like a cached one."""
    mvn = shutil.which("mvn")
    if mvn is None:
        raise KafkaHarnessError("`mvn` is not on PATH; it is needed once to fetch Kafka's jars")
    version = kafka_version()
    _progress(f"fetching Apache Kafka {version} from Maven Central (first run only)...")
    started = time.monotonic()
    partial = libs.with_name("libs.partial")
    shutil.rmtree(partial, ignore_errors=True)
    shutil.rmtree(libs, ignore_errors=True)
    command = [
        mvn, "-B", "-q", "-Dstyle.color=never", "-f", str(POM),
        # A private local repository: nothing depends on, or leaks into, ~/.m2.
        f"-Dmaven.repo.local={cache_dir / 'm2'}",
        "dependency:copy-dependencies", "-DincludeScope=runtime",
        f"-DoutputDirectory={partial}",
    ]  # fmt: skip
    result = subprocess.run(
        command, stdin=subprocess.DEVNULL, capture_output=True, text=True, check=False
    )
    if result.returncode != 0 or not (partial / f"kafka_2.13-{version}.jar").is_file():
        output = (result.stdout + result.stderr).strip()
        raise KafkaHarnessError(f"fetching Kafka {version} with Maven failed:\n{output}")
    (partial / MARKER).write_text(f"{version}\n")
    partial.rename(libs)
    jars = list(libs.glob("*.jar"))
    size_mb = sum(jar.stat().st_size for jar in jars) / 1e6
    elapsed = time.monotonic() - started
    _progress(f"fetched {len(jars)} jars ({size_mb:.0f} MB) in {elapsed:.0f} s into {libs}")


def _progress(message: str) -> None:
    print(f"[kafka_broker] {message}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- the broker


class KafkaBroker:
    """A running broker; `bootstrap` is what clients pass as bootstrap servers."""

    def __init__(self, process: subprocess.Popen[bytes], bootstrap: str, log_path: Path) -> None:
        self.process = process
        self.bootstrap = bootstrap
        self.log_path = log_path

    @classmethod
    def start(
        cls,
        work_dir: Path,
        cache_dir: Path = CACHE_DIR,
        timeout: float = START_TIMEOUT_S,
        jvm_opts: tuple[str, ...] = JVM_OPTS,
    ) -> KafkaBroker:
        """Format fresh storage under `work_dir` and start a broker on free loopback ports.

        Free ports are only free until someone binds them, so a clash is retried with new
        ports rather than failing the test run.
        """
        libs = fetch(cache_dir)
        java = _java()
        work_dir.mkdir(parents=True, exist_ok=True)
        for _ in range(PORT_ATTEMPTS - 1):
            with contextlib.suppress(_PortTaken):
                return cls._start_once(java, libs, work_dir, timeout, jvm_opts)
        return cls._start_once(java, libs, work_dir, timeout, jvm_opts)

    @classmethod
    def _start_once(
        cls, java: str, libs: Path, work_dir: Path, timeout: float, jvm_opts: tuple[str, ...]
    ) -> KafkaBroker:
        broker = cls._launch(java, libs, work_dir, jvm_opts)
        try:
            broker._wait_until_ready(timeout)
        except BaseException:
            broker.stop()
            raise
        return broker

    @classmethod
    def _launch(
        cls, java: str, libs: Path, work_dir: Path, jvm_opts: tuple[str, ...]
    ) -> KafkaBroker:
        broker_port, controller_port = _free_ports(2)
        config = _write_config(work_dir, broker_port, controller_port)
        _format_storage(java, libs, work_dir, config)
        log_path = work_dir / "broker.log"
        with log_path.open("wb") as log:
            # Own session: a Ctrl-C meant for pytest does not hit the JVM mid-test, and
            # stop() can signal the whole group.
            process = subprocess.Popen(
                [*_java_command(java, libs, work_dir, jvm_opts), "kafka.Kafka", str(config)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        broker = cls(process, f"{HOST}:{broker_port}", log_path)
        _running.add(broker)
        return broker

    def _wait_until_ready(self, timeout: float) -> None:
        """Wait for the "started" log line and an accepting listener.

        The port alone is not enough: it opens before the broker has caught up with the
        metadata log and would answer clients with errors for a moment.
        """
        deadline = time.monotonic() + timeout
        host, port = self.bootstrap.rsplit(":", 1)
        while time.monotonic() < deadline:
            log = self._read_log()
            if "Address already in use" in log:
                raise _PortTaken(self._failure("a port was taken"))
            if self.process.poll() is not None:
                raise KafkaHarnessError(self._failure(f"exited with {self.process.returncode}"))
            if READY_LINE in log and _accepts(host, int(port)):
                return
            time.sleep(0.1)
        raise KafkaHarnessError(self._failure(f"was not ready after {timeout:g} s"))

    def stop(self) -> None:
        """Stop gracefully (SIGTERM lets the broker close its logs), then force it."""
        _running.discard(self)
        if self.process.poll() is not None:
            return
        _signal_group(self.process, signal.SIGTERM)
        try:
            self.process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            _signal_group(self.process, signal.SIGKILL)
            self.process.wait()

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        return "\n".join(self._read_log().splitlines()[-lines:])

    def _read_log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def _failure(self, what: str) -> str:
        return f"Kafka broker {what}; last lines of {self.log_path}:\n{self.log_tail()}"

    def __enter__(self) -> KafkaBroker:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


_running: set[KafkaBroker] = set()


@atexit.register
def _stop_all() -> None:
    """A test run that forgets stop() (or crashes) must not leave a JVM behind."""
    for broker in list(_running):
        broker.stop()


def _signal_group(process: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, sig)


def _java() -> str:
    java_home = os.environ.get("JAVA_HOME")
    java = str(Path(java_home) / "bin" / "java") if java_home else shutil.which("java")
    if not java or not Path(java).is_file():
        raise KafkaHarnessError("no `java` found (set JAVA_HOME or put Java 17+ on PATH)")
    return java


def _java_command(
    java: str, libs: Path, work_dir: Path, jvm_opts: tuple[str, ...] = JVM_OPTS
) -> list[str]:
    return [
        java,
        *jvm_opts,
        f"-Dlog4j2.configurationFile={work_dir / 'log4j2.properties'}",
        "-cp",
        f"{libs}/*",
    ]


def _free_ports(count: int) -> list[int]:
    """Ask the kernel for distinct free ports, holding all sockets so none repeats."""
    with contextlib.ExitStack() as stack:
        sockets = [stack.enter_context(socket.socket()) for _ in range(count)]
        for sock in sockets:
            sock.bind((HOST, 0))
        return [sock.getsockname()[1] for sock in sockets]


def _accepts(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1):
            return True
    except OSError:
        return False


def _server_properties(data_dir: Path, broker_port: int, controller_port: int) -> dict[str, str]:
    """One node that is both broker and controller, formatted as a standalone dynamic quorum
    (KIP-853, the 4.x way: `controller.quorum.bootstrap.servers` + `format --standalone`).

    Internal topics get one partition and one replica: there is one broker, and creating
    50 offset partitions would slow the first consumer-group join in every test run.
    """
    return {
        "process.roles": "broker,controller",
        "node.id": "1",
        "controller.quorum.bootstrap.servers": f"{HOST}:{controller_port}",
        "controller.listener.names": "CONTROLLER",
        "listeners": f"PLAINTEXT://{HOST}:{broker_port},CONTROLLER://{HOST}:{controller_port}",
        "advertised.listeners": f"PLAINTEXT://{HOST}:{broker_port}",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "log.dirs": str(data_dir),
        "num.partitions": "1",
        # An event may carry 1 MiB of data plus its envelope (default limit ~1 MB).
        "message.max.bytes": "2097152",
        "replica.fetch.max.bytes": "2097152",
        "default.replication.factor": "1",
        "auto.create.topics.enable": "true",
        "offsets.topic.replication.factor": "1",
        "offsets.topic.num.partitions": "1",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "transaction.state.log.num.partitions": "1",
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1",
        "group.initial.rebalance.delay.ms": "0",
        # Few threads for a 2-core machine; tests never need the throughput.
        "num.network.threads": "2",
        "num.io.threads": "2",
        "background.threads": "2",
        # Compaction tests should not wait the default 15 s between cleaner passes, and the
        # default 128 MiB dedupe buffer would take a quarter of the heap.
        "log.cleaner.backoff.ms": "1000",
        "log.cleaner.dedupe.buffer.size": str(16 * 1024 * 1024),
    }


def _write_config(work_dir: Path, broker_port: int, controller_port: int) -> Path:
    data_dir = work_dir / "kafka-data"
    shutil.rmtree(data_dir, ignore_errors=True)  # a retry or reuse formats from scratch
    properties = _server_properties(data_dir, broker_port, controller_port)
    config = work_dir / "server.properties"
    config.write_text("".join(f"{key}={value}\n" for key, value in properties.items()))
    (work_dir / "log4j2.properties").write_text(LOG4J2_PROPERTIES)
    return config


def _format_storage(java: str, libs: Path, work_dir: Path, config: Path) -> None:
    """KRaft refuses to start on unformatted log dirs; this is `kafka-storage.sh format`."""
    command = [
        *_java_command(java, libs, work_dir),
        "kafka.tools.StorageTool", "format", "--standalone",
        "--cluster-id", _cluster_id(), "--config", str(config),
    ]  # fmt: skip
    result = subprocess.run(
        command, stdin=subprocess.DEVNULL, capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        output = (result.stdout + result.stderr).strip()
        raise KafkaHarnessError(f"formatting Kafka storage failed:\n{output}")


def _cluster_id() -> str:
    """A random cluster id in Kafka's format (a base64url UUID); Kafka avoids a leading
    '-' so that the id is never mistaken for a command-line flag, and so do we."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


# --------------------------------------------------------------------------- CLI


def _run(work_dir: Path | None) -> int:
    """Start a broker and keep it until Ctrl-C (or SIGTERM), for manual experiments."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    if work_dir is not None:
        return _serve(work_dir)
    with tempfile.TemporaryDirectory(prefix="kafka-") as temp:
        return _serve(Path(temp))


def _serve(work_dir: Path) -> int:
    started = time.monotonic()
    with KafkaBroker.start(work_dir) as broker:
        _progress(f"broker up in {time.monotonic() - started:.1f} s; log: {broker.log_path}")
        print(broker.bootstrap, flush=True)
        try:
            code = broker.process.wait()
        except KeyboardInterrupt:
            _progress("stopping...")
            return 0
    _progress(f"broker exited on its own with {code}:\n{broker.log_tail()}")
    return 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.harness.kafka_broker")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("fetch", help="download the broker's jars into the cache")
    run = commands.add_parser("run", help="start a broker, print its address, wait for Ctrl-C")
    run.add_argument("--work-dir", type=Path, help="keep data and logs here (default: temp)")
    args = parser.parse_args(argv)
    try:
        if args.command == "fetch":
            _progress(f"jars in {fetch()}")
            return 0
        return _run(args.work_dir)
    except KafkaHarnessError as error:
        _progress(str(error))
        return 1


if __name__ == "__main__":
    sys.exit(main())
