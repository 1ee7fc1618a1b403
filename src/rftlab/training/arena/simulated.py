"""A simulated arena learner behind the tinker interface: a stand-in for a model, used to exercise the whole
Stage-1 lineage (docs/arena.md §11 "Procedure") where the local tiny model stops early.

**What it imitates.** A tinker service whose LoRA "model" learns the arena protocol as it trains. There
are no weights: a checkpoint is only its number of optimizer steps ``s``, and its *competence* is
``q(s) = q_max − (q_max − q_base)·exp(−s / tau)``. A sampled reply is the scripted team policy's reply
(``rftlab.policies.arena.providers.ScriptedProvider``: the balanced local-priority action, its reference
broadcast, the inbox rule) with probability ``q(s)``, and otherwise a corrupted reply of one of four kinds
(cut JSON, a wrong key, an out-of-range action id, an unsupported fact), chosen by a hash of the prompt,
``s`` and the seed, so sampling is deterministic. The reported training loss is ``2·(1 − q(s)) + 0.05``:
a made-up number that falls as competence rises. The prompt is read back from its tokens (the local arena BPE,
Qwen3 chat template), so the lineage runs through exactly the calls it makes on a real service.

Nothing this produces says anything about a language model; reports name it "simulated learner" next to
every number it produced.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

SIMULATED_MODEL = "rftlab/simulated-arena-learner"
_PATH = re.compile(
    r"tinker://simulated-(?P<model>[0-9]+)-[0-9a-f]{12}-s(?P<steps>[0-9]+)/sampler_weights/[^/]+"
)
_STATE_PATH = re.compile(
    r"tinker://simulated-(?P<model>[0-9]+)-[0-9a-f]{12}-s(?P<steps>[0-9]+)/weights/[^/]+"
)


@dataclass(frozen=True)
class Competence:
    """``q(s) = q_max − (q_max − q_base)·exp(−s/tau)``: the probability of the scripted reply after s steps.
    With ``format_learned``, a trained checkpoint (s > 0) still errs but only in content (an illegal
    action id, an unsupported fact), never in the JSON format."""

    q_base: float = 0.6
    q_max: float = 0.9995
    tau: float = 10.0
    format_learned: bool = False

    def __call__(self, steps: int) -> float:
        return self.q_max - (self.q_max - self.q_base) * math.exp(-steps / self.tau)


LEARNS = Competence()
PLATEAUS = Competence(q_base=0.6, q_max=0.95, tau=15.0, format_learned=True)
"""A learner that learns the JSON format but keeps stating unsupported facts and illegal ids 5% of the
time: it passes the overfit check and no checkpoint is eligible (the step-4 stop)."""
SIMULATED_MODELS: dict[str, Competence] = {
    SIMULATED_MODEL: LEARNS,
    SIMULATED_MODEL + "-plateau": PLATEAUS,
}


class _Done:
    """A resolved future (``.result()``), like the SDK's."""

    def __init__(self, value: Any):
        self._value = value

    def result(self, timeout: float | None = None) -> Any:
        return self._value


class _MemoTokenizer:
    """The local arena BPE with ``encode`` memoised by its arguments: the simulation renders the same system
    prompt and the same validation and frozen prompts many times, and only its speed changes. The
    renderer's calls with ``split_special_tokens`` are memoised too: a lineage makes 54,126 of them."""

    def __init__(self, inner: Any):
        self._inner = inner
        self._memo: dict[tuple[object, ...], list[int]] = {}

    def encode(self, text: str, add_special_tokens: bool = True, **kwargs: Any) -> list[int]:
        key = (text, add_special_tokens, *sorted(kwargs.items()))
        try:
            tokens = self._memo.get(key)
        except TypeError:  # an unhashable keyword value: not memoised
            return self._inner.encode(text, add_special_tokens=add_special_tokens, **kwargs)
        if tokens is None:
            if len(self._memo) > 200_000:
                self._memo.clear()
            tokens = self._memo[key] = self._inner.encode(
                text, add_special_tokens=add_special_tokens, **kwargs
            )
        return list(tokens)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def __len__(self) -> int:
        return len(self._inner)


_TOKENIZER: list[_MemoTokenizer] = []


def _tokenizer() -> Any:
    from rftlab.training.arena.sft import arena_bpe_tokenizer

    if not _TOKENIZER:
        _TOKENIZER.append(_MemoTokenizer(arena_bpe_tokenizer()))
    return _TOKENIZER[0]


def _uniform(*parts: Any) -> float:
    digest = hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def _corrupt(reply: str, user: dict[str, Any], u: float, content_only: bool = False) -> str:
    """One of four deterministic corruptions of a correct reply (chosen by ``u`` in [0, 1)); with
    ``content_only`` only the two that keep the JSON format."""
    kind = 2 + int(u * 2) if content_only else int(u * 4)
    if kind == 0:
        return reply[: max(1, len(reply) // 2)]  # cut JSON
    obj = json.loads(reply)
    if kind == 1:
        obj = {("action" if k == "action_id" else "fact" if k == "facts" else k): v for k, v in obj.items()}
        return json.dumps(obj)
    if user.get("phase") == "ACT":
        return json.dumps({"action_id": "A99"})  # not a displayed action
    facts = obj.get("facts") or []
    nodes = user["observation"].get("unknown_neighbors") or ["V00"]
    fact = dict(facts[0]) if facts else {
        "node": nodes[0], "owner": "RED", "status": "SECURE", "value": 3, "critical": False, "observed_turn": 0,
    }  # fmt: skip
    fact["value"] = 1 + (fact["value"] % 3)  # contradicts the sender's own observation
    return json.dumps({**obj, "facts": [fact, *facts[1:]]})


class SimulatedSampler:
    """``SamplingClient`` of one simulated checkpoint."""

    def __init__(self, steps: int, competence: Competence, seed: int, base_model: str):
        from rftlab.policies.arena.providers import ScriptedProvider

        self.steps, self.competence, self.seed, self.base_model = steps, competence, seed, base_model
        self._policy = ScriptedProvider()
        self._tokenizer = _tokenizer()

    def get_tokenizer(self) -> Any:
        return self._tokenizer

    def get_base_model(self) -> str:
        return self.base_model

    def _reply(self, text: str) -> str:
        user_text = text.rsplit("<|im_start|>user\n", 1)[-1].split("<|im_end|>", 1)[0]
        user = json.loads(user_text)
        reply = self._policy.complete([{"role": "user", "content": user_text}], "")
        q = self.competence(self.steps)
        if _uniform("keep", text, self.steps, self.seed) < q:
            return reply
        content_only = self.competence.format_learned and self.steps > 0
        return _corrupt(reply, user, _uniform("kind", text, self.steps, self.seed), content_only)

    def sample(self, prompt: Any, num_samples: int, sampling_params: Any, **kwargs: Any) -> _Done:
        import numpy as np
        from tinker import types

        text = self._tokenizer.decode(prompt.to_ints())
        tokens = self._tokenizer.encode(self._reply(text) + "<|im_end|>", add_special_tokens=False)
        tokens = tokens[: sampling_params.max_tokens or len(tokens)]
        stopped = tokens and tokens[-1] == self._tokenizer.convert_tokens_to_ids("<|im_end|>")
        seqs = [
            types.SampledSequence(
                stop_reason="stop" if stopped else "length",
                sequence_id=f"simulated-{i}",
                tokens_np=np.asarray(tokens, dtype=np.int32),
                logprobs_np=np.zeros(len(tokens), dtype=np.float32),
            )
            for i in range(num_samples)
        ]
        return _Done(types.SampleResponse(sequences=seqs, prompt_logprobs_np=None))


class SimulatedTrainingClient:
    """``TrainingClient`` whose only state is its optimizer step count."""

    def __init__(self, service: SimulatedArenaService, base_model: str, seed: int):
        self.service, self.base_model, self.seed = service, base_model, seed
        self.competence = SIMULATED_MODELS[base_model]
        self.steps = 0
        index = list(SIMULATED_MODELS).index(base_model)
        self.model_id = f"simulated-{index}-{uuid.uuid4().hex[:12]}"

    def get_tokenizer(self) -> Any:
        return _tokenizer()

    def forward_backward(self, data: Sequence[Any], loss_fn: str = "cross_entropy", **kwargs: Any) -> _Done:
        from tinker import types

        weights = sum(float(sum(d.loss_fn_inputs["weights"].to_torch().tolist())) for d in data)
        per_token = 2.0 * (1.0 - self.competence(self.steps)) + 0.05
        return _Done(
            types.ForwardBackwardOutput(
                loss_fn_output_type="ArrayRecord",
                loss_fn_outputs=[],
                metrics={"loss:sum": per_token * weights},
            )
        )

    def optim_step(self, params: Any) -> _Done:
        self.steps += 1
        return _Done(None)

    def _path(self, kind: str, name: str) -> str:
        # the step count travels in the path, so another process can open the same checkpoint
        return f"tinker://{self.model_id}-s{self.steps}/{kind}/{name}"

    def save_weights_for_sampler(self, name: str, **kwargs: Any) -> _Done:
        from tinker import types

        return _Done(types.SaveWeightsForSamplerResponse(path=self._path("sampler_weights", name)))

    def save_state(self, name: str, **kwargs: Any) -> _Done:
        from tinker import types

        return _Done(types.SaveWeightsResponse(path=self._path("weights", name)))

    def save_weights_and_get_sampling_client(self, **kwargs: Any) -> _Done:
        return _Done(SimulatedSampler(self.steps, self.competence, self.seed, self.base_model))


class SimulatedArenaService:
    """``ServiceClient`` of the simulated learners (``SIMULATED_MODELS``; see the module docstring)."""

    def __init__(self, seed: int = 0):
        self.seed = seed

    def create_lora_training_client(
        self, base_model: str, rank: int = 32, seed: int | None = None, **kwargs: Any
    ) -> _Done:
        if base_model not in SIMULATED_MODELS:
            raise ValueError(f"the simulated service serves {sorted(SIMULATED_MODELS)}, not {base_model!r}")
        return _Done(SimulatedTrainingClient(self, base_model, self.seed))

    def create_training_client_from_state_with_optimizer(self, path: str, **kwargs: Any) -> _Done:
        """The training client a ``save_state`` path names (its learner and step count), to resume."""
        match = _STATE_PATH.fullmatch(path)
        if match is None:
            raise ValueError(f"state {path} is not a simulated training state path")
        client = SimulatedTrainingClient(self, list(SIMULATED_MODELS)[int(match["model"])], self.seed)
        client.steps = int(match["steps"])
        return _Done(client)

    def create_sampling_client(
        self, model_path: str | None = None, base_model: str | None = None, **kwargs: Any
    ) -> _Done:
        if model_path is not None:
            match = _PATH.fullmatch(model_path)
            if match is None:
                raise ValueError(f"checkpoint {model_path} is not a simulated checkpoint path")
            model, steps = list(SIMULATED_MODELS)[int(match["model"])], int(match["steps"])
        elif base_model in SIMULATED_MODELS:
            model, steps = base_model, 0
        else:
            raise ValueError(f"the simulated service serves {sorted(SIMULATED_MODELS)}, not {base_model!r}")
        return _Done(SimulatedSampler(steps, SIMULATED_MODELS[model], self.seed, model))
