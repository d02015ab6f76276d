"""kubeadm certs check-expiration and kubeadm certs renew: the certificates kubeadm manages on a control-plane node, their
residual time on the double's certificate clock (pki.certificate_now), and their renewal with the same keys and attributes.

Written from the Kubernetes documentation ("Certificate Management with kubeadm") and kubeadm's sources
(cmd/kubeadm/app/cmd/certs.go, cmd/kubeadm/app/phases/certs/renewal): the table is a tabwriter (minwidth 10, tabwidth 4,
padding 3) with the expiry as "Jan 02, 2006 15:04 MST" and the residual time as apimachinery's ShortHumanDuration."""

import os
import re
import sys
import tempfile

import yaml

from kube_double.client import Client
from kube_double.core import EXIT_LAB_ERROR, Fail, b64, now, parse_flags, path, read_file, unb64, write_file
from kube_double.pki import certificate_now, clock_offset, not_after, openssl


# name -> (where the certificate is: a PKI base name or a kubeconfig, its CA, what renew says of it), in kubeadm's order.
CERTIFICATES = {
    "admin.conf": ("/etc/kubernetes/admin.conf", "ca", "certificate embedded in the kubeconfig file for the admin to use and for kubeadm itself"),
    "apiserver": ("/etc/kubernetes/pki/apiserver", "ca", "certificate for serving the Kubernetes API"),
    "apiserver-etcd-client": ("/etc/kubernetes/pki/apiserver-etcd-client", "etcd-ca", "certificate the apiserver uses to access etcd"),
    "apiserver-kubelet-client": ("/etc/kubernetes/pki/apiserver-kubelet-client", "ca", "certificate for the API server to connect to kubelet"),
    "controller-manager.conf": ("/etc/kubernetes/controller-manager.conf", "ca",
                                "certificate embedded in the kubeconfig file for the controller manager to use"),
    "etcd-healthcheck-client": ("/etc/kubernetes/pki/etcd/healthcheck-client", "etcd-ca", "certificate for liveness probes to healthcheck etcd"),
    "etcd-peer": ("/etc/kubernetes/pki/etcd/peer", "etcd-ca", "certificate for etcd nodes to communicate with each other"),
    "etcd-server": ("/etc/kubernetes/pki/etcd/server", "etcd-ca", "certificate for serving etcd"),
    "front-proxy-client": ("/etc/kubernetes/pki/front-proxy-client", "front-proxy-ca", "certificate for the front proxy client"),
    "scheduler.conf": ("/etc/kubernetes/scheduler.conf", "ca", "certificate embedded in the kubeconfig file for the scheduler manager to use"),
    "super-admin.conf": ("/etc/kubernetes/super-admin.conf", "ca", "certificate embedded in the kubeconfig file for the super-admin"),
}


AUTHORITIES = {"ca": "/etc/kubernetes/pki/ca", "etcd-ca": "/etc/kubernetes/pki/etcd/ca", "front-proxy-ca": "/etc/kubernetes/pki/front-proxy-ca"}


# kubeadm's certificateValidityPeriod default (ClusterConfiguration v1beta4): one year.
VALIDITY_DAYS = 365


def certs(arguments):
    if arguments[:1] == ["check-expiration"]:
        return check_expiration(arguments[1:])
    if arguments[:1] == ["renew"]:
        return renew(arguments[1:])
    raise Fail(f"kubeadm (lab double): `kubeadm certs {' '.join(arguments[:1])}` is not modelled (lab/doubles/kube/README.md)", EXIT_LAB_ERROR)


FLAGS = {"--config", "--cert-dir", "--kubeconfig", "-o", "--output", "-v", "--v"}


def is_kubeconfig(location):
    return location.endswith(".conf")


def read_certificate(location):
    """The certificate PEM of a PKI base name or a kubeconfig's embedded client certificate; None when the file is absent."""
    try:
        if not is_kubeconfig(location):
            return read_file(f"{location}.crt")
        config = yaml.safe_load(read_file(location))
    except FileNotFoundError:
        return None
    return unb64(config["users"][0]["user"]["client-certificate-data"])


def short_human_duration(seconds):
    """k8s.io/apimachinery/pkg/util/duration.ShortHumanDuration."""
    if seconds < -1:
        return "<invalid>"
    if seconds < 0:
        return "0s"
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m"
    hours = seconds // 3600
    if hours < 24:
        return f"{hours}h"
    if hours < 24 * 365:
        return f"{hours // 24}d"
    return f"{hours // 24 // 365}y"


def tabwrite(rows):
    """text/tabwriter with minwidth 10, tabwidth 4, padding 3, padchar ' ': every cell but a line's last is tab-terminated and
    padded to the width of its column block (the run of adjacent lines that have a terminated cell in that column)."""
    widths = [[0] * (len(row) - 1) for row in rows]
    for column in range(max(len(row) for row in rows)):
        line = 0
        while line < len(rows):
            if len(rows[line]) - 1 <= column:
                line += 1
                continue
            end = line
            while end < len(rows) and len(rows[end]) - 1 > column:
                end += 1
            width = max(max(len(rows[index][column]) + 3 for index in range(line, end)), 10)
            for index in range(line, end):
                widths[index][column] = width
            line = end
    return "\n".join("".join(cell.ljust(width) for cell, width in zip(row, widths[index])) + row[-1] for index, row in enumerate(rows))


def reading_configuration(phase, flags):
    """kubeadm reads the ClusterConfiguration from the cluster first, and falls back to the defaults when it cannot."""
    print(f'[{phase}] Reading configuration from the "kubeadm-config" ConfigMap in namespace "kube-system"...')
    print(f"[{phase}] Use 'kubeadm init phase upload-config --config your-config-file' to re-upload it.")
    try:
        Client.from_kubeconfig(flags.get("--kubeconfig", "/etc/kubernetes/admin.conf"), timeout=5).call(
            "GET", "/api/v1/namespaces/kube-system/configmaps/kubeadm-config")
    except Fail as error:
        klog_warning("utils.go:69", f"[{phase}] Error reading configuration from the Cluster. Falling back to default configuration: {error}")


def klog_warning(location, message):
    """A warning line as klog writes it to stderr: W<mmdd hh:mm:ss.uuuuuu> <pid> <file:line>] <message>."""
    print(f"W{now():%m%d %H:%M:%S}.000000 {os.getpid():>7} {location}] {message}", file=sys.stderr)


def check_expiration(arguments):
    flags, _positional = parse_flags(arguments, FLAGS, set())
    reading_configuration("check-expiration", flags)
    moment = certificate_now()
    rows = [("CERTIFICATE", "EXPIRES", "RESIDUAL TIME", "CERTIFICATE AUTHORITY", "EXTERNALLY MANAGED")]
    for name, (location, authority, _description) in CERTIFICATES.items():
        pem = read_certificate(location)
        if pem is None:
            rows.append((f"!MISSING! {name}", ""))
            continue
        expiry = not_after(pem)
        rows.append((name, expiry.strftime("%b %d, %Y %H:%M UTC"), short_human_duration(int((expiry - moment).total_seconds())), authority,
                     f"{yes_no(not os.path.exists(path(AUTHORITIES[authority] + '.key'))):<8}"))
    authorities = [("CERTIFICATE AUTHORITY", "EXPIRES", "RESIDUAL TIME", "EXTERNALLY MANAGED")]
    for name, location in AUTHORITIES.items():
        pem = read_certificate(location)
        if pem is None:
            authorities.append((f"!MISSING! {name}", ""))
            continue
        expiry = not_after(pem)
        authorities.append((name, expiry.strftime("%b %d, %Y %H:%M UTC"), short_human_duration(int((expiry - moment).total_seconds())),
                            f"{yes_no(not os.path.exists(path(location + '.key'))):<8}"))
    print()
    print(tabwrite(rows))
    print()
    print(tabwrite(authorities))
    return 0


def yes_no(value):
    return "yes" if value else "no"


def renew(arguments):
    flags, positional = parse_flags(arguments, FLAGS, set())
    known = ["all", *CERTIFICATES]
    if len(positional) != 1 or positional[0] not in known:
        raise Fail(f'unknown command "{" ".join(positional)}" for "kubeadm certs renew"' if positional else
                   "missing subcommand; \"renew\" is not meant to be run on its own")
    names = list(CERTIFICATES) if positional[0] == "all" else positional
    reading_configuration("renew", flags)
    print()
    for name in names:
        location, authority, description = CERTIFICATES[name]
        pem = read_certificate(location)
        if pem is None:
            if positional[0] == "all":
                continue  # renew all skips what this node does not have (super-admin.conf on a joined control plane)
            raise Fail(f"error execution phase: {name} does not exist")
        ca = AUTHORITIES[authority]
        if not os.path.exists(path(f"{ca}.key")):
            print(f"Detected external {authority}, {description} can't be renewed")
            continue
        renewed = resign(pem, private_key(location), ca)
        if is_kubeconfig(location):
            config = yaml.safe_load(read_file(location))
            config["users"][0]["user"]["client-certificate-data"] = b64(renewed)
            write_file(location, yaml.safe_dump(config, sort_keys=False), 0o600)
        else:
            write_file(f"{location}.crt", renewed)
        print(f"{description} renewed")
    print("\nDone renewing certificates. You must restart the kube-apiserver, kube-controller-manager, kube-scheduler and etcd, "
          "so that they can use the new certificates.")
    return 0


def private_key(location):
    if is_kubeconfig(location):
        return unb64(yaml.safe_load(read_file(location))["users"][0]["user"]["client-key-data"])
    return read_file(f"{location}.key")


def resign(certificate_pem, key_pem, ca):
    """The certificate again, with its key, subject and extensions, signed by its CA for a year of the double's clock: openssl
    starts it now (real time, so that TLS accepts it) and ends it a year after the double's now."""
    days = VALIDITY_DAYS + clock_offset() // 86400
    with tempfile.TemporaryDirectory() as scratch:
        key_file = os.path.join(scratch, "key")
        with open(key_file, "w", encoding="utf-8") as handle:
            handle.write(key_pem)
        request = openssl("x509", "-x509toreq", "-signkey", key_file, "-copy_extensions", "copyall", stdin=certificate_pem)
        serial = str(int.from_bytes(os.urandom(8), "big") >> 1)
        signed = openssl("x509", "-req", "-CA", path(f"{ca}.crt"), "-CAkey", path(f"{ca}.key"), "-days", str(days), "-set_serial", serial,
                         "-copy_extensions", "copyall", stdin=request)
    return re.search(r"-----BEGIN CERTIFICATE-----.*?-----END CERTIFICATE-----\n", signed, re.DOTALL).group(0)
