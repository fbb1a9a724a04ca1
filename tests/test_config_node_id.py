"""Which Raft member a controller is, from controller.node_id, peers and the hostname."""

from __future__ import annotations

import pytest

from spur.config import ConfigError, ControllerConfig, SpurConfig, resolve_node_id

K8S_PEERS = (
    "spurctld-0.spurctld.spur.svc.cluster.local:6821",
    "spurctld-1.spurctld.spur.svc.cluster.local:6821",
    "spurctld-2.spurctld.spur.svc.cluster.local:6821",
)


def _cfg(peers: tuple[str, ...] = (), node_id: int | None = None) -> SpurConfig:
    return SpurConfig(controller=ControllerConfig(peers=peers, node_id=node_id), source="spur.conf")


@pytest.mark.parametrize(
    ("peers", "node_id", "hostname", "expected"),
    [
        # explicit node_id wins over everything
        (K8S_PEERS, 3, "spurctld-0", 3),
        ((), 1, "anything", 1),
        # no peers: a one-member group, whatever the hostname
        ((), None, "spurctld-2", 1),
        ((), None, "laptop", 1),
        # peers FQDN matched by the short hostname and by the FQDN
        (K8S_PEERS, None, "spurctld-1", 2),
        (K8S_PEERS, None, "spurctld-2.spurctld.spur.svc.cluster.local", 3),
        (K8S_PEERS, None, "SPURCTLD-0", 1),
        # short peer names matched by an FQDN hostname
        (("ctl1:6821", "ctl2:6821", "ctl3:6821"), None, "ctl3.example.com", 3),
        (("ctl1:6821", "ctl2:6821"), None, "ctl2", 2),
        # exact match is preferred over a first-label match
        (("a.x:6821", "a:6821"), None, "a", 2),
        # IPv6 and IPv4 peers, exact only
        (("[fd00::1]:6821", "[fd00::2]:6821"), None, "fd00::2", 2),
        (("10.0.0.1:6821", "10.0.0.2:6821"), None, "10.0.0.2", 2),
        # no peer matches: StatefulSet ordinal
        (("10.0.0.1:6821", "10.0.0.2:6821", "10.0.0.3:6821"), None, "spurctld-2", 3),
        (("10.0.0.1:6821", "10.0.0.2:6821"), None, "ctl-0.example.com", 1),
    ],
)
def test_resolution(peers: tuple[str, ...], node_id: int | None, hostname: str, expected: int) -> None:
    assert resolve_node_id(_cfg(peers, node_id), hostname) == expected


def test_explicit_node_id_out_of_range() -> None:
    with pytest.raises(ConfigError) as exc:
        resolve_node_id(_cfg(K8S_PEERS, 4), "spurctld-0")
    msg = str(exc.value)
    assert msg.startswith("spur.conf: controller.node_id = 4: must be in 1..3")
    assert K8S_PEERS[2] in msg


def test_explicit_node_id_without_peers_must_be_one() -> None:
    with pytest.raises(ConfigError, match=r"controller.node_id = 2: must be in 1..1"):
        resolve_node_id(_cfg((), 2), "x")


def test_ambiguous_hostname() -> None:
    peers = ("ctl.a.example:6821", "ctl.b.example:6821")
    with pytest.raises(ConfigError) as exc:
        resolve_node_id(_cfg(peers), "ctl")
    msg = str(exc.value)
    assert (
        "'ctl' matches several peers" in msg and "ctl.a.example:6821" in msg and "ctl.b.example:6821" in msg
    )
    assert msg.startswith("spur.conf: controller.peers = [")


def test_no_match_and_no_ordinal() -> None:
    with pytest.raises(ConfigError) as exc:
        resolve_node_id(_cfg(("ctl1:6821", "ctl2:6821")), "login1")
    msg = str(exc.value)
    assert "'login1' matches no peer" in msg and '"ctl1:6821", "ctl2:6821"' in msg


def test_ordinal_out_of_range() -> None:
    with pytest.raises(ConfigError) as exc:
        resolve_node_id(_cfg(K8S_PEERS[:2]), "other-5")
    assert "ordinal 5, giving node id 6, but there are only 2 peers" in str(exc.value)
