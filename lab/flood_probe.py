"""The HTTP API's two floods at an attacker's scale (issue 29 #1, #2): `python -m lab.flood_probe`.

tests/ops/test_serve_flood.py runs each attack small (100 connections against a cap of 64), as a test must.
This runs them as the probe did: ATTACKERS connections against the default cap (MAX_CONNECTIONS), each
reconnecting as soon as the server closes it, for --seconds while another client asks `GET /briefs` on a
new connection every 0.25 s, and 20 s more after the attack stops reconnecting. It prints, per attack and
configuration, the fresh requests answered within 5 s (during, after), the daemon's most descriptors and
how many attacking connections the server closed; one JSON object a line.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from lab.workspace import Workspace
from tests.ops.test_serve_attack import Served
from tests.ops.test_serve_flood import TOKEN, Attack, Connect, NeverReads, TrickledBody, under_attack

ATTACKERS = 290  # the probe's 260-300 connections
AFTER_S = 20.0
ATTACKS: dict[str, type[Connect]] = {"never-reads": NeverReads, "trickled-bodies": TrickledBody}
# command, token: the Done-when's "token set and not, under briefd serve and briefd run"
CONFIGS = {"serve": (("serve",), None), "serve-token": (("serve",), TOKEN),
           "run": (("run",), None), "run-token": (("run",), TOKEN)}


def start(config: str) -> Served:
    root = Path(tempfile.mkdtemp(prefix="briefd-flood-"))
    (root / "inbox").mkdir()
    ws = Workspace(root=root, searxng_url="http://127.0.0.1:9", ollama_url="http://127.0.0.1:9",
                   model="lab-scripted")
    command, token = CONFIGS[config]
    env = {"BRIEFD_SERVE_TOKEN": token} if token else {}
    if command == ("run",):
        env["BRIEFD_SERVE"] = "true"
    return Served(ws, command=command, **env)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="how long each attack runs")
    parser.add_argument("--attack", choices=list(ATTACKS), action="append", help="default: both")
    parser.add_argument("--config", choices=list(CONFIGS), action="append", help="default: all four")
    args = parser.parse_args()
    for name in args.attack or list(ATTACKS):
        for config in args.config or list(CONFIGS):
            served = start(config)
            token = CONFIGS[config][1]
            headers = {"Authorization": f"Bearer {token}"} if token else {}
            try:
                with Attack(served.port, ATTACKERS, ATTACKS[name]) as attack:
                    time.sleep(3)
                    during, peak = under_attack(served, attack, headers, args.seconds)
                    attack.stop.set()
                    attack.thread.join(30)
                    after, _ = under_attack(served, attack, headers, AFTER_S)
            finally:
                served.stop()
            print(json.dumps({"attack": name, "config": config, "during": f"{during.answered}/{during.asked}",
                              "after": f"{after.answered}/{after.asked}", "peak_descriptors": peak,
                              "closed_by_server": attack.closed_by_server,
                              "failures": sorted(set(during.failures + after.failures))}), flush=True)


if __name__ == "__main__":
    main()
