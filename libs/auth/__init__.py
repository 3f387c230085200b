"""Who is calling: API keys, roles, the operator, and the gRPC interceptor."""

from libs.auth.interceptor import AuthInterceptor, current_principal
from libs.auth.keys import (
    ApiKeySecret,
    KeyRecord,
    KeyStore,
    hash_secret,
    new_api_key,
    parse_api_key,
)
from libs.auth.principal import Principal, Role, authorize, requires, requires_service

__all__ = [
    "ApiKeySecret",
    "AuthInterceptor",
    "KeyRecord",
    "KeyStore",
    "Principal",
    "Role",
    "authorize",
    "current_principal",
    "hash_secret",
    "new_api_key",
    "parse_api_key",
    "requires",
    "requires_service",
]
