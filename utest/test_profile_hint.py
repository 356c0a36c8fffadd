"""The hint of a differential profile: a frame is named only beyond sampling noise (A/A pairs
of multinomial samples name none), the deepest frame that explains its callers' growth with
its caller chain (a slowed leaf is named, not its callers), and nothing where the DUT's CPU
per request did not change."""

from __future__ import annotations

import numpy as np
import pytest

from libraries.results.profile import Folded, function_changes, grown, rename_binaries
from libraries.results.profile_hint import (
    LISTED,
    CostChange,
    Hint,
    Part,
    profile_hint,
    share_intervals,
)

PERIOD = 1e9 / 499  # ns per sample at perf's -F 499
LOOP = "nginx;ngx_worker_process_cycle;ngx_process_events_and_timers;ngx_epoll_process_events"
WRITE = f"{LOOP};ngx_http_request_handler;ngx_http_write_filter;ngx_ssl_send_chain;SSL_write"
READ = f"{LOOP};ngx_http_wait_request_handler;ngx_ssl_recv;SSL_read"
BASE = {  # an nginx TLS proxy's profile: stack -> share of samples
    f"{WRITE};EVP_EncryptUpdate;aesni_gcm_encrypt": 12.0,
    f"{WRITE};EVP_EncryptUpdate;CRYPTO_gcm128_encrypt_ctr32": 2.0,
    f"{WRITE};tls13_record;memcpy": 4.0,
    f"{WRITE};ssl3_write_bytes;__x64_sys_sendto_[k];tcp_sendmsg_[k]": 10.0,
    f"{WRITE};ssl3_write_bytes;__x64_sys_sendto_[k];tcp_push_[k]": 3.0,
    f"{READ};EVP_DecryptUpdate;aesni_gcm_decrypt": 8.0,
    f"{READ};ssl3_read_bytes;__x64_sys_recvfrom_[k];tcp_recvmsg_[k]": 8.0,
    f"{READ};ssl3_read_bytes;__x64_sys_recvfrom_[k];skb_copy_datagram_iter_[k]": 3.0,
    f"{LOOP};epoll_wait;entry_SYSCALL_64_[k];do_epoll_wait_[k]": 6.0,
    f"{LOOP};epoll_wait;entry_SYSCALL_64_[k];schedule_[k]": 4.0,
    f"{LOOP};ngx_http_wait_request_handler;ngx_http_parse_request_line": 3.0,
    f"{LOOP};ngx_http_wait_request_handler;ngx_http_process_request_headers": 3.0,
    f"{LOOP};ngx_http_upstream_handler;ngx_http_upstream_process_header": 4.0,
    f"{LOOP};ngx_http_upstream_handler;ngx_ssl_send_chain;SSL_write;EVP_EncryptUpdate;"
    "aesni_gcm_encrypt": 5.0,
    f"{LOOP};ngx_event_expire_timers": 1.0,
    f"{LOOP};malloc": 3.0,
    f"{LOOP};free": 2.0,
    f"{LOOP};[nginx]": 4.0,
    "nginx;ngx_master_process_cycle;sigsuspend": 0.5,
    "nginx;[unknown]": 1.5,
}


def sampled(shares: dict[str, float], samples: int, rng: np.random.Generator) -> Folded:
    """A profile of ``samples`` samples drawn from ``shares`` (weights in ns, as perf's)."""
    stacks = list(shares)
    p = np.array([shares[s] for s in stacks])
    counts = rng.multinomial(samples, p / p.sum())
    return Folded({s: int(c * PERIOD) for s, c in zip(stacks, counts, strict=True) if c})


def slowed(shares: dict[str, float], function: str, factor: float) -> dict[str, float]:
    """``shares`` with every stack that ends on CPU in ``function`` ``factor`` times as
    heavy (the function takes that much longer per call, the rest unchanged)."""
    return {s: w * (factor if s.rsplit(";", 1)[-1] == function else 1.0)
            for s, w in shares.items()}


@pytest.mark.parametrize("samples", [2500, 5000])
def test_an_aa_pair_names_no_function_in_at_least_95_percent(samples):
    rng = np.random.default_rng(52)
    pairs = 400
    hints = [profile_hint(sampled(BASE, samples, rng), sampled(BASE, samples, rng), PERIOD)
             for _ in range(pairs)]
    quiet = sum(h.kind == "noise" for h in hints)
    assert quiet >= 0.95 * pairs, [h.text() for h in hints if h.kind != "noise"][:5]
    assert hints[0].text().startswith("no function changed beyond noise (")
    assert f"{samples:,} and {samples:,} samples" in hints[0].text()
    # what the test guards against: the shares alone always "grow" somewhere
    rng = np.random.default_rng(52)
    old = [grown(function_changes(sampled(BASE, samples, rng), sampled(BASE, samples, rng)))
           for _ in range(50)]
    assert all(change is not None for change in old)


def on_the_way_to(part: Part, function: str) -> bool:
    """Whether ``part`` names ``function`` or a caller of it in one of BASE's stacks."""
    node = ";".join(part.path)
    return any(stack.endswith(";" + function) and (stack == node or stack.startswith(node + ";"))
               for stack in BASE)


@pytest.mark.parametrize(("samples", "named_at_least"), [(2500, 187), (5000, 200)])
def test_a_slowed_leaf_is_named_with_its_callers_not_an_ancestor(samples, named_at_least):
    """The leaf is named itself in 187 of 200 pairs at 2,500 samples (192 before callees had
    to beat the growth's other parts beyond noise), 200 of 200 at 5,000; where its caller is
    named (noise made the growth look split), the leaf's branch is its first part."""
    rng = np.random.default_rng(7)
    slower = slowed(BASE, "aesni_gcm_encrypt", 1.5)
    hints = [profile_hint(sampled(BASE, samples, rng), sampled(slower, samples, rng), PERIOD)
             for _ in range(200)]
    named = [h.function for h in hints]
    assert named.count("aesni_gcm_encrypt") >= named_at_least, set(named)
    for hint in hints:  # never a caller without the leaf's branch first among its parts
        assert hint.function in ("aesni_gcm_encrypt", None) or \
            on_the_way_to(hint.parts[0], "aesni_gcm_encrypt"), hint.text()
    hint = next(h for h in hints if h.function == "aesni_gcm_encrypt")
    assert hint.own and hint.chain().startswith("EVP_EncryptUpdate <- SSL_write <- ")
    assert hint.low > 0 and hint.a_pct < hint.b_pct and not hint.parts
    text = hint.text()
    assert text.startswith("side b spends a larger share of the DUT's CPU in aesni_gcm_encrypt "
                           "(on CPU itself) ")
    assert "called from EVP_EncryptUpdate <- SSL_write <- " in text
    assert "of its growth" not in text
    record = hint.as_record()
    assert record["function"] == "aesni_gcm_encrypt" and record["chain"][:2] == [
        "EVP_EncryptUpdate", "SSL_write"] and record["kind"] == "frame"
    assert "parts" not in record


SPLIT = {f"{WRITE};EVP_EncryptUpdate;aesni_gcm_encrypt": 6.0,
         f"{WRITE};ssl3_write_bytes;__x64_sys_sendto_[k];tcp_sendmsg_[k]": 6.0}
"""A growth split evenly over two leaves of ``SSL_write`` (+6 % of the CPU each; their
shares grow +4.1 and +4.3 points), reached through different callees."""


def grown_by(shares: dict[str, float], added: dict[str, float]) -> dict[str, float]:
    """``shares`` with ``added`` weight on the given stacks (the rest unchanged)."""
    return {s: w + added.get(s, 0.0) for s, w in shares.items()}


def split_named(hint: Hint, caller: str, leaves: tuple[str, ...]) -> bool:
    """Whether ``hint`` names ``caller`` and lists every one of ``leaves`` as a part."""
    listed = {part.path[-1] for part in hint.parts}
    return hint.function == caller and set(leaves) <= listed


@pytest.mark.parametrize(("samples", "leaves_named"), [(2500, 160), (5000, 190)])
def test_a_growth_split_over_two_leaves_names_their_caller_with_each_leaf_s_share(
        samples, leaves_named):
    """The review's case: a walk by the estimate named one of the two leaves at random (97
    of 100 pairs at 5,000 samples, either one) and never the other; now ``SSL_write`` is
    named with both leaves' branches as its parts in 193 of 200 pairs at 2,500 samples per
    side (the leaves themselves in 165: noise within a branch stops the walk into it at a
    caller of the leaf) and 196 at 5,000 (the leaves themselves in 196)."""
    rng = np.random.default_rng(60)
    b_shares = grown_by(BASE, SPLIT)
    hints = [profile_hint(sampled(BASE, samples, rng), sampled(b_shares, samples, rng), PERIOD)
             for _ in range(200)]
    leaves = ("aesni_gcm_encrypt", "tcp_sendmsg_[k]")
    branches = [h for h in hints if h.function == "SSL_write" and all(
        any(on_the_way_to(part, leaf) for part in h.parts) for leaf in leaves)]
    assert len(branches) >= 190, [h.text() for h in hints if h not in branches][:3]
    both = [h for h in hints if split_named(h, "SSL_write", leaves)]
    assert len(both) >= leaves_named
    hint = both[0]
    assert not hint.own and hint.low > 0 and len(hint.parts) == 2
    shares = sorted(part.share for part in hint.parts)
    assert 0.3 < shares[0] <= shares[1] < 0.8  # each about half of SSL_write's growth
    text = hint.text()
    assert text.startswith("side b spends a larger share of the DUT's CPU in SSL_write (with "
                           "what it called) ")
    assert "; of its growth: " in text and "aesni_gcm_encrypt <- EVP_EncryptUpdate (+" in text
    assert "tcp_sendmsg_[k] <- __x64_sys_sendto_[k] <- ssl3_write_bytes (+" in text
    assert f"{100 * hint.parts[0].share:.0f} % in " in text
    record = hint.as_record()
    assert [p["function"] for p in record["parts"]] == [p.path[-1] for p in hint.parts]
    assert record["parts"][0]["via"] and record["more"] == 0


def test_an_even_split_under_one_caller_lists_both_leaves_with_points_and_intervals():
    """Two leaves directly under their caller, each twice as heavy in b: the caller is named
    in 300 of 300 pairs (the review's count for one leaf named at random), both leaves listed
    with their change and its interval (the frames' level)."""
    a = {"nginx;SSL_write;aesni_gcm_encrypt": 10.0, "nginx;SSL_write;sha256_block": 10.0,
         "nginx;other": 80.0}
    b = {"nginx;SSL_write;aesni_gcm_encrypt": 20.0, "nginx;SSL_write;sha256_block": 20.0,
         "nginx;other": 80.0}
    rng = np.random.default_rng(8)
    hints = [profile_hint(sampled(a, 2500, rng), sampled(b, 2500, rng), PERIOD)
             for _ in range(300)]
    both = [h for h in hints if split_named(h, "SSL_write", ("aesni_gcm_encrypt",
                                                            "sha256_block"))]
    assert len(both) >= 285, [h.function for h in hints if h not in both]
    part = both[0].parts[0]
    assert part.low < part.points < part.high and part.via == ()
    assert part.text() == (f"{100 * part.share:.0f} % in {part.path[-1]} ({part.points:+.1f} "
                           f"points [{part.low:+.1f}, {part.high:+.1f}])")


def test_ties_between_a_frame_and_its_only_caller_go_to_the_deeper_frame():
    # EVP_EncryptUpdate and aesni_gcm_encrypt grow exactly alike (aesni is all of it)
    a = Folded({"nginx;SSL_write;EVP_EncryptUpdate;aesni_gcm_encrypt": 1000 * int(PERIOD),
                "nginx;other": 9000 * int(PERIOD)})
    b = Folded({"nginx;SSL_write;EVP_EncryptUpdate;aesni_gcm_encrypt": 2000 * int(PERIOD),
                "nginx;other": 8000 * int(PERIOD)})
    hint = profile_hint(a, b, PERIOD)
    assert hint.function == "aesni_gcm_encrypt" and hint.chain() == \
        "EVP_EncryptUpdate <- SSL_write <- nginx"
    assert hint.points == pytest.approx(10.0)


def test_growth_spread_over_many_callees_names_their_caller_with_what_it_called():
    leaves = [f"leaf{i}" for i in range(8)]
    a = {f"nginx;parse;{leaf}": 2.0 for leaf in leaves} | {"nginx;other": 84.0}
    b = {f"nginx;parse;{leaf}": 3.0 for leaf in leaves} | {"nginx;other": 84.0}
    hint = profile_hint(sampled(a, 20000, np.random.default_rng(3)),
                        sampled(b, 20000, np.random.default_rng(4)), PERIOD)
    assert (hint.kind, hint.function, hint.own) == ("frame", "parse", False)
    assert "in parse (with what it called)" in hint.text()
    # the parts: the LISTED largest leaves (about an eighth each), the others counted
    assert [len(part.path) for part in hint.parts] == [3] * LISTED and hint.more == 8 - LISTED
    assert all(0.05 < part.share < 0.25 for part in hint.parts)
    assert hint.text().endswith(f"{hint.parts[-1].text()}, and {8 - LISTED} more callees "
                                "that grew")
    assert hint.as_record()["more"] == 8 - LISTED


def test_a_growth_split_between_a_frame_and_its_callee_lists_the_frame_itself():
    """Half the growth on CPU in ``SSL_write`` itself, half in its callee: the callee does not
    explain it, so ``SSL_write`` is named (its own share carries EXPLAINS of it: ``on CPU
    itself``) with both parts, its own share as ``itself``."""
    a = {"nginx;SSL_write": 10.0, "nginx;SSL_write;aesni_gcm_encrypt": 10.0,
         "nginx;other": 80.0}
    b = {"nginx;SSL_write": 20.0, "nginx;SSL_write;aesni_gcm_encrypt": 20.0,
         "nginx;other": 80.0}
    hint = profile_hint(Folded({s: int(w * 100 * PERIOD) for s, w in a.items()}),
                        Folded({s: int(w * 100 * PERIOD) for s, w in b.items()}), PERIOD)
    assert hint.function == "SSL_write" and hint.own
    (first, second) = sorted(hint.parts, key=lambda part: part.itself)
    assert (first.path[-1], second.path[-1], second.itself) == (
        "aesni_gcm_encrypt", "SSL_write", True)
    assert first.share == pytest.approx(0.5) and second.share == pytest.approx(0.5)
    assert "% in SSL_write itself (+" in hint.text()


def test_an_unchanged_cpu_per_request_means_the_profile_does_not_explain_the_change():
    rng = np.random.default_rng(11)
    a, b = sampled(BASE, 5000, rng), sampled(slowed(BASE, "do_epoll_wait_[k]", 2.0), 5000, rng)
    assert profile_hint(a, b, PERIOD).function == "do_epoll_wait_[k]"  # the shares moved
    same = CostChange("busy cores per request", 0.4, -1.8, 2.6)
    hint = profile_hint(a, b, PERIOD, same)
    assert hint.kind == "not_cpu" and hint.function is None
    assert hint.text() == (
        "the DUT's busy cores per request did not change (+0.4 % [-1.8, +2.6]): the CPU "
        "profile does not explain this change (the same CPU per unit of work: look at "
        "waiting, latency, the network or the load generator)")
    assert hint.as_record()["cost"]["low_pct"] == -1.8
    dearer = CostChange("busy cores per request", 6.0, 2.5, 9.8)
    named = profile_hint(a, b, PERIOD, dearer)
    assert named.function == "do_epoll_wait_[k]"
    assert named.text().endswith("; the DUT's busy cores per request +6.0 % [+2.5, +9.8]")


def test_an_aa_pair_with_the_same_cpu_per_request_says_noise_not_a_change():
    """An A/A pair has no change to explain: its hint is the noise sentence even when the
    DUT's CPU per request is known unchanged (the real A/A runs of wave 6 said "does not
    explain this change" before)."""
    rng = np.random.default_rng(7)
    same = CostChange("busy cores per request", 3.4, -18.7, 36.6)
    hint = profile_hint(sampled(BASE, 2500, rng), sampled(BASE, 2500, rng), PERIOD, same)
    assert hint.kind == "noise" and hint.text().startswith("no function changed beyond noise")


def test_the_share_interval_is_newcombes_hybrid_score_interval():
    # Newcombe (1998), table II, example (a): 56/70 against 48/80 -> 0.2 [0.0524, 0.3339]
    d, low, high = share_intervals(np.array([48.0]), 80, np.array([56.0]), 70, 0.05)
    assert (d[0], low[0], high[0]) == pytest.approx((0.2, 0.0524, 0.3339), abs=1e-4)
    assert Hint("noise", (1.0, 1.0), 1).function is None


def test_a_build_of_another_file_name_is_compared_under_side_a_s_names():
    """Side b's nginx at /tmp/nginx-copy heads its stacks with ``nginx-copy`` and names its
    own code ``[nginx-copy]``: compared as they are, every frame of it "grows" from nothing
    (a real A/A run of a copy named it, +74.9 points); under side a's names, it is noise."""
    rng = np.random.default_rng(11)
    copy = {s.replace("nginx;", "nginx-copy;").replace("[nginx]", "[nginx-copy]"): w
            for s, w in BASE.items()}
    a, b = sampled(BASE, 5000, rng), sampled(copy, 5000, rng)
    assert profile_hint(a, b, PERIOD).kind == "frame"
    renamed = rename_binaries(b, {"nginx-copy": "nginx"})
    assert set(renamed.stacks) <= set(BASE)
    assert renamed.total == b.total
    assert profile_hint(a, renamed, PERIOD).kind == "noise"
    assert rename_binaries(b, {}) is b


def test_a_kernel_frame_is_shown_with_the_call_of_the_program_that_led_into_it():
    """The real TLS-records A/B of wave 6 named ``tcp_rcv_established_[k]``; its 20 nearest
    callers are kernel frames, so the chain shows the nearest few and then ``SSL_write``."""
    kernel = [f"k{i}_[k]" for i in range(20)]
    path = ("nginx", "ngx_ssl_send_chain", "SSL_write", "BIO_write", "[libcrypto.so.3]",
            "__GI___libc_write", *kernel, "tcp_rcv_established_[k]")
    chain = Hint("frame", (1.0, 1.0), 1, path=path).chain()
    assert chain == ("k19_[k] <- k18_[k] <- k17_[k] <- ... <- __GI___libc_write <- BIO_write "
                     "<- SSL_write <- ...")


def test_the_interval_shown_always_cleared_the_noise_and_names_whose_it_is():
    """A named callee's own interval need not clear zero (the growth is established at an
    ancestor): the hint then shows the ancestor's interval and names it (a real run of the
    unit suite showed a callee's [-0.5, ...] as if it were beyond noise)."""
    rng = np.random.default_rng(3)
    slow = slowed(BASE, "aesni_gcm_encrypt", 1.5)
    hints = [profile_hint(sampled(BASE, 1500, rng), sampled(slow, 1500, rng), PERIOD)
             for _ in range(200)]
    named = [h for h in hints if h.kind == "frame"]
    assert named and all(h.low > 0 for h in named)
    # a callee beating its sibling beyond noise while its own interval holds zero (1,500
    # samples a side, 40 other frames: 2 of 1,000 sampled pairs above look like this)
    a = {"nginx;EVP;aesni": 210.0, "nginx;EVP;CRYPTO": 30.0}
    b = {"nginx;EVP;aesni": 274.0, "nginx;EVP;CRYPTO": 35.0}
    for side in (a, b):
        side |= {f"nginx;other{i}": (1500 - sum(side.values())) / 40 for i in range(40)}
    carried = profile_hint(Folded({s: int(w * PERIOD) for s, w in a.items()}),
                           Folded({s: int(w * PERIOD) for s, w in b.items()}), PERIOD)
    assert (carried.function, carried.grew) == ("aesni", "EVP") and carried.low >= 0
    assert "most of the growth of EVP and what it called: +4.6 points [+0.0, " in \
        carried.text()
    assert carried.as_record()["grew"] == "EVP"
