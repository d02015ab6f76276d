"""After every refused run the server is as prepare left it: no source, key, package or hold."""
testinfra_hosts = ["driver_refusals"]


def test_no_repository_was_configured(host):
    assert host.check_output("ls /etc/apt/sources.list.d").split() == ["debian.sources"]
    assert host.run("ls /etc/apt/keyrings").stdout.split() == []


def test_no_driver_package_or_hold(host):
    listing = host.run("dpkg-query -W -f='${Package}\\n' 'nvidia-*' 'libnvidia-*' 'linux-headers-*'").stdout.split()
    assert listing == []
    assert host.check_output("apt-mark showhold") == ""
    assert not host.file("/etc/apt/preferences.d/onprem-gpu-nvidia_driver.pref").exists
    assert not host.file("/etc/modprobe.d/blacklist-nouveau.conf").exists
