"""openssl: keys and certificates as kubeadm makes them (RSA 2048, CA valid 10 years, leaves 1 year), the CA hash a join pins,
the bootstrap signer's JWS, and kubeconfigs."""

import base64
import datetime
import hashlib
import hmac
import json
import os
import secrets
import ssl
import subprocess
import tempfile

import yaml

from kube_double.core import Fail, LabError, b64, parse_duration, path, read_file, unb64, write_file


def openssl(*arguments, stdin=None):
    result = subprocess.run(["openssl", *arguments], input=stdin, capture_output=True, text=True, check=False,
                            env=dict(os.environ, LC_ALL="C"))
    if result.returncode != 0:
        raise LabError(f"openssl {' '.join(arguments[:2])} failed: {result.stderr.strip()}")
    return result.stdout


def new_key(name):
    openssl("genrsa", "-out", path(name), "2048")
    os.chmod(path(name), 0o600)


def new_ca(name, common_name):
    new_key(f"{name}.key")
    openssl("req", "-x509", "-new", "-key", path(f"{name}.key"), "-subj", f"/CN={common_name}", "-days", "3650",
            "-set_serial", str(secrets.randbits(63)), "-out", path(f"{name}.crt"),
            "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,digitalSignature,keyEncipherment,keyCertSign")


def sign(csr_pem, ca, subject=None, sans=(), client=True, server=False):
    """Sign a CSR (PEM text) with the CA at <ca>.crt/<ca>.key; returns the certificate PEM."""
    usages = ",".join(usage for usage, wanted in (("clientAuth", client), ("serverAuth", server)) if wanted)
    extensions = ["keyUsage=critical,digitalSignature,keyEncipherment", f"extendedKeyUsage={usages}", "basicConstraints=critical,CA:FALSE"]
    if sans:
        extensions.append("subjectAltName=" + ",".join(sans))
    with tempfile.NamedTemporaryFile("w", suffix=".ext") as extfile:
        extfile.write("\n".join(extensions) + "\n")
        extfile.flush()
        arguments = ["x509", "-req", "-CA", path(f"{ca}.crt"), "-CAkey", path(f"{ca}.key"), "-days", "365",
                     "-set_serial", str(secrets.randbits(63)), "-extfile", extfile.name]
        if subject:
            arguments += ["-subj", subject]
        return openssl(*arguments, stdin=csr_pem)


def new_leaf(name, ca, subject, sans=(), client=True, server=False):
    new_key(f"{name}.key")
    csr = openssl("req", "-new", "-key", path(f"{name}.key"), "-subj", subject)
    write_file(f"{name}.crt", sign(csr, ca, sans=sans, client=client, server=server))


def ca_hash(ca_pem):
    """sha256 of the CA's DER SubjectPublicKeyInfo, as the kubeadm documentation computes it with openssl."""
    public_key = openssl("x509", "-pubkey", "-noout", stdin=ca_pem)
    der = subprocess.run(["openssl", "pkey", "-pubin", "-outform", "der"], input=public_key.encode(),
                         capture_output=True, check=True).stdout
    return "sha256:" + hashlib.sha256(der).hexdigest()


def jws(payload, token_id, token_secret):
    """Detached JWS (HS256) of the cluster-info kubeconfig, as the bootstrap signer writes it."""
    header = base64.urlsafe_b64encode(json.dumps({"alg": "HS256", "kid": token_id}, separators=(",", ":")).encode()).rstrip(b"=")
    body = base64.urlsafe_b64encode(payload.encode()).rstrip(b"=")
    signature = hmac.new(token_secret.encode(), header + b"." + body, hashlib.sha256).digest()
    return header.decode() + ".." + base64.urlsafe_b64encode(signature).rstrip(b"=").decode()


def kubeconfig(cluster, server, ca_pem, user, certificate_pem=None, key_pem=None, token=None):
    credentials = {}
    if certificate_pem:
        credentials = {"client-certificate-data": b64(certificate_pem), "client-key-data": b64(key_pem)}
    if token:
        credentials = {"token": token}
    return yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "preferences": {},
        "clusters": [{"name": cluster, "cluster": {"certificate-authority-data": b64(ca_pem), "server": server}}],
        "contexts": [{"name": f"{user}@{cluster}", "context": {"cluster": cluster, "user": user}}],
        "current-context": f"{user}@{cluster}",
        "users": [{"name": user, "user": credentials}],
    }, sort_keys=False)


def load_kubeconfig(name):
    try:
        config = yaml.safe_load(read_file(name))
    except FileNotFoundError:
        raise Fail(f"stat {name}: no such file or directory") from None
    context_name = config.get("current-context")
    context = next((c["context"] for c in config.get("contexts", []) if c["name"] == context_name), None)
    if context is None:
        raise Fail(f'error loading config file "{name}": no context "{context_name}"')
    cluster = next(c["cluster"] for c in config["clusters"] if c["name"] == context["cluster"])
    user = next(u["user"] for u in config["users"] if u["name"] == context["user"])
    return cluster, user


def file_or_data(section, key):
    if f"{key}-data" in section:
        return unb64(section[f"{key}-data"])
    if key in section:
        with open(path(section[key]), encoding="utf-8") as handle:
            return handle.read()
    return None


# The lab's clock knob (README, "Certificates and the clock"): a Go duration added to the real time wherever the double
# judges a certificate's validity (the API server's client certificates, check-expiration, renew), so that certificates
# made today can be 11 months old. openssl's dates stay real: the knob moves the double's "now", never a certificate.
CLOCK_OFFSET_FILE = "/etc/kube-double/clock-offset"


def clock_offset():
    """Seconds the double's certificate clock runs ahead of the real one (0 without the knob)."""
    try:
        text = read_file(CLOCK_OFFSET_FILE).strip()
    except FileNotFoundError:
        return 0
    try:
        return parse_duration(text) if text else 0
    except Fail:
        raise LabError(f"{CLOCK_OFFSET_FILE}: {text!r} is not a Go duration (8160h is 340 days)") from None


def certificate_now():
    """The double's certificate clock, to the microsecond (a certificate signed this second has less than its period left)."""
    return datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=clock_offset())


def not_after(certificate_pem):
    """A certificate's notAfter (aware UTC datetime), read with openssl."""
    text = openssl("x509", "-noout", "-enddate", "-dateopt", "iso_8601", stdin=certificate_pem).strip().split("=", 1)[1]
    return datetime.datetime.strptime(text, "%Y-%m-%d %H:%M:%SZ").replace(tzinfo=datetime.timezone.utc)


def certificate_expired(peer_certificate):
    """Whether a TLS peer's certificate (ssl's getpeercert() dict) has expired on the double's certificate clock."""
    return certificate_now().timestamp() > ssl.cert_time_to_seconds(peer_certificate["notAfter"])
