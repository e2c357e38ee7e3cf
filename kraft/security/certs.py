"""A CA and node/client certificates as PEM files, made with the `cryptography` package, for a
secured cluster (docs/security.md) and the tests.

    python -m kraft.security.certs --out certs --node 1 --node 2 --node 3 --client admin

writes `ca.pem` (the truststore: ssl.truststore.location), `ca.key`, and per node
`node-N.pem` (certificate chain and key in one file: ssl.keystore.location with
ssl.keystore.type=PEM; subject CN=node-N, SANs localhost, 127.0.0.1 and --host names) and per
client `client-NAME.pem` (CN=NAME, for mTLS: ssl.principal.mapping.rules maps it to User:NAME).
Private keys are written mode 0600; with --key-password they are encrypted (ssl.key.password).
"""

from __future__ import annotations

import argparse
import datetime
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALID_DAYS = 825


@dataclass(frozen=True)
class CertificateAuthority:
    key: ec.EllipticCurvePrivateKey
    certificate: x509.Certificate


def _name(common_name: str, organization: str | None = None) -> x509.Name:
    attributes = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    if organization:
        attributes.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    return x509.Name(attributes)


def _validity(builder: x509.CertificateBuilder) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.timezone.utc)
    return builder.not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(
        now + datetime.timedelta(days=VALID_DAYS))


def make_ca(common_name: str = "kraft-ca") -> CertificateAuthority:
    key = ec.generate_private_key(ec.SECP256R1())
    name = _name(common_name)
    cert = (_validity(x509.CertificateBuilder()).subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False, data_encipherment=False,
                                         key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
            .sign(key, hashes.SHA256()))
    return CertificateAuthority(key, cert)


def issue(ca: CertificateAuthority, common_name: str, hosts: list[str] = (),  # type: ignore[assignment]
          organization: str | None = None) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    """A leaf certificate for servers and clients alike (serverAuth and clientAuth)."""
    key = ec.generate_private_key(ec.SECP256R1())
    sans: list[x509.GeneralName] = []
    for host in hosts:
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            sans.append(x509.DNSName(host))
    builder = (_validity(x509.CertificateBuilder()).subject_name(_name(common_name, organization))
               .issuer_name(ca.certificate.subject).public_key(key.public_key())
               .serial_number(x509.random_serial_number())
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
               .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH,
                                                     ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False))
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return key, builder.sign(ca.key, hashes.SHA256())


def _write_private(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def key_pem(key: ec.EllipticCurvePrivateKey, password: str | None = None) -> bytes:
    encryption = (serialization.BestAvailableEncryption(password.encode()) if password
                  else serialization.NoEncryption())
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)


def cert_pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def write_ca(ca: CertificateAuthority, out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    (out / "ca.pem").write_bytes(cert_pem(ca.certificate))
    _write_private(out / "ca.key", key_pem(ca.key))
    return out / "ca.pem"


def write_keystore(ca: CertificateAuthority, path: Path, common_name: str, hosts: list[str] = (),  # type: ignore[assignment]
                   key_password: str | None = None, organization: str | None = None) -> Path:
    """One PEM file: the certificate, the CA's, then the private key (Kafka's PEM keystore)."""
    key, cert = issue(ca, common_name, list(hosts), organization)
    _write_private(path, cert_pem(cert) + cert_pem(ca.certificate) + key_pem(key, key_password))
    return path


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m kraft.security.certs", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, type=Path, help="directory to write the PEM files to")
    parser.add_argument("--node", action="append", default=[], help="a node id (node-ID.pem, CN=node-ID)")
    parser.add_argument("--host", action="append", default=[],
                        help="a host name or IP in every node certificate (localhost and 127.0.0.1 always)")
    parser.add_argument("--client", action="append", default=[], help="a client name (client-NAME.pem, CN=NAME)")
    parser.add_argument("--key-password", default=None, help="encrypt the private keys (ssl.key.password)")
    args = parser.parse_args(argv)
    ca_key = args.out / "ca.key"
    if ca_key.exists():  # more certificates from the same CA
        ca_cert = x509.load_pem_x509_certificate((args.out / "ca.pem").read_bytes())
        ca = CertificateAuthority(serialization.load_pem_private_key(ca_key.read_bytes(), None), ca_cert)  # type: ignore[arg-type]
    else:
        ca = make_ca()
        write_ca(ca, args.out)
    hosts = ["localhost", "127.0.0.1", *args.host]
    for node in args.node:
        print(write_keystore(ca, args.out / f"node-{node}.pem", f"node-{node}", hosts, args.key_password))
    for client in args.client:
        print(write_keystore(ca, args.out / f"client-{client}.pem", client, (), args.key_password))
    print(args.out / "ca.pem")


if __name__ == "__main__":
    main()
