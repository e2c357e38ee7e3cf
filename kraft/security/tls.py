"""TLS contexts from Kafka's PEM keys: the listener's (server) and the one this node uses to call
the other nodes' listeners (client, checked against the same truststore)."""

from __future__ import annotations

import ssl

from kraft.config import ConfigError, KraftConfig

_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}


def _versions(context: ssl.SSLContext, config: KraftConfig) -> None:
    enabled = sorted(_VERSIONS[v] for v in config["ssl.enabled.protocols"])
    context.minimum_version, context.maximum_version = enabled[0], enabled[-1]


def _load_keystore(context: ssl.SSLContext, config: KraftConfig) -> None:
    path = config["ssl.keystore.location"]
    try:
        context.load_cert_chain(path, password=config["ssl.key.password"])
    except (OSError, ssl.SSLError) as e:  # the password itself never appears in the message
        raise ConfigError("ssl.keystore.location", f"cannot load the certificate chain and key from {path} "
                                                   f"(PEM; an encrypted key needs ssl.key.password): {e}") from None


def _load_truststore(context: ssl.SSLContext, config: KraftConfig) -> None:
    path = config["ssl.truststore.location"]
    try:
        context.load_verify_locations(cafile=path)
    except (OSError, ssl.SSLError) as e:
        raise ConfigError("ssl.truststore.location", f"cannot load CA certificates from {path}: {e}") from None


def server_context(config: KraftConfig, tls: bool | None = None) -> ssl.SSLContext | None:
    """The client listener's context (or, with `tls`, another listener's that does or does not
    speak TLS); None for PLAINTEXT and SASL_PLAINTEXT."""
    if not (config.uses_tls if tls is None else tls):
        return None
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _versions(context, config)
    _load_keystore(context, config)
    if config["ssl.truststore.location"]:
        _load_truststore(context, config)
    context.verify_mode = _CLIENT_AUTH[config["ssl.client.auth"]]
    return context


def peer_context(config: KraftConfig) -> ssl.SSLContext | None:
    """How this node calls the others (whose listeners speak the same protocol): the truststore
    (else the system's CAs) checks them; with client auth on, this node shows its own certificate."""
    if not config.uses_tls:
        return None
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    _versions(context, config)
    if config["ssl.truststore.location"]:
        _load_truststore(context, config)
    else:
        context.load_default_certs()
    context.check_hostname = config["ssl.endpoint.identification.algorithm"].lower() == "https"
    if config["ssl.client.auth"] != "none":
        _load_keystore(context, config)
    return context
