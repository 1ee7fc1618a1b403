"""Checks to run before paying for a poker RFT job (cheap, local, model-free).

1. ``group_shares_hands``: two candidates of one row get the same opponent and cards (row-shared mode),
   so GRPO compares strategies, not luck (the spectrum seed's frozen-runs bug in poker form).
2. ``reward_separates_skill``: on a few rows, the arm's reward ranks the exploit strategy above
   always-call. The gain reward is built to ignore a fixed strategy's skill, so for it this check only
   records the two means (it cannot fail: it is reported as informational).
3. ``garbage_is_counted``: a malformed tool call is refused, counted as illegal and scored, not raised.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rftlab.envs.poker.env import PokerEnv, PokerEnvConfig
from rftlab.launch.poker.spec import PokerArmSpec
from rftlab.policies.poker.reference import AlwaysCall, Exploit
from rftlab.rewards.poker import REWARDS
from rftlab.rollout.poker.play import play_rft


@dataclass
class PokerPreflight:
    checks: list[dict[str, Any]] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return all(c["passed"] for c in self.checks)

    def to_dict(self) -> dict[str, Any]:
        return {"passed": self.passed, "checks": self.checks}


def poker_preflight(spec: PokerArmSpec, rows: int = 6) -> PokerPreflight:
    report = PokerPreflight()
    a, b = (
        PokerEnv(PokerEnvConfig(mode="rft", hands=spec.hands)),
        PokerEnv(PokerEnvConfig(mode="rft", hands=spec.hands)),
    )
    same = all(
        (a.reset(f"pf_{i}").next_query or a.task).__repr__()
        == (b.reset(f"pf_{i}").next_query or b.task).__repr__()
        for i in range(rows)
    )
    report.checks.append({"name": "group_shares_hands", "passed": same,
                          "detail": "two candidates of each row see identical first decisions" if same
                          else "candidates of one row see different hands: GRPO would compare luck"})  # fmt: skip
    ids = [f"pf_{i}" for i in range(rows)]
    reward = REWARDS[spec.reward]

    def mean_reward(policy) -> float:
        scores = [reward(list(t.metrics["hand_bb"]), t.metrics["illegal_actions"])["score"]
                  for t in play_rft(policy, ids, hands=spec.hands)]  # fmt: skip
        return sum(scores) / len(scores)

    exploit, call = mean_reward(Exploit(samples=60)), mean_reward(AlwaysCall())
    informational = spec.reward == "gain"
    report.checks.append({"name": "reward_separates_skill", "passed": informational or exploit > call,
                          "detail": f"mean {spec.reward} reward: exploit {exploit:+.3f}, always-call {call:+.3f}"
                          + (" (informational: the gain reward ignores a fixed strategy's skill)" if informational else "")})  # fmt: skip
    env = PokerEnv(PokerEnvConfig(mode="rft", hands=spec.hands))
    env.reset("pf_garbage")
    r = env.step({"action": ["not", "a", "word"], "amount": "lots"})
    ok = r.info.illegal and env.metrics()["illegal_actions"] == 1
    report.checks.append({"name": "garbage_is_counted", "passed": ok, "detail": r.info.reason or ""})
    return report
