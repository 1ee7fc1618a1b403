"""The contracts every layer above plugs into: environments, policies, what a rollout produced, the
sampling/training backend and the launcher.

This module is the bottom layer: it imports nothing from ``rftlab`` (and nothing outside the standard
library), so every other layer may depend on it. Shapes follow tinker-cookbook's ``rl/types.py``
(``StepResult``, ``Transition``, ``Trajectory``) with two differences that suit this project:
observations and actions are whatever the env defines (text, structured scans, tool calls), not token
lists, and every step carries a typed ``info`` record instead of a bare metrics dict.

    env: Env[Obs, Act, Info]       reset(key) -> Obs ; step(action) -> StepResult[Obs, Info] ; metrics()
    policy: Policy[Obs, Act]       reset(seed) ; act(observation) -> Act
    rftlab.rollout.episode(env, policy, key) -> Trajectory      (the one episode loop)

Backends (``SamplingClient``, ``TrainingClient``, ``ServiceClient``) are the subset of the tinker SDK the
RL/SFT loops use; ``tinker.ServiceClient`` satisfies them as it is, and so does the local
tinker-compatible backend. A ``Launcher`` turns an arm spec into a run folder in the run store and
reports its status; ``local``, ``fireworks`` and ``tinker`` launchers implement it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, Literal, Protocol, TypeVar, runtime_checkable

ObsT = TypeVar("ObsT")
ActT = TypeVar("ActT")
InfoT = TypeVar("InfoT")
ObsT_co = TypeVar("ObsT_co", covariant=True)
ActT_co = TypeVar("ActT_co", covariant=True)
ActT_contra = TypeVar("ActT_contra", contravariant=True)
ObsT_contra = TypeVar("ObsT_contra", contravariant=True)

Metrics = dict[str, Any]
"""Episode- or step-level scalar metrics by name (floats, ints, ``None`` where undefined)."""

EpisodeKey = Any
"""What makes an episode reproducible: a seed (``int``) or a dataset row id (``str``). Envs document
which they take; the same key (with the same env config) always yields the same episode."""


# ----------------------------------------------------------------------------------------- envs


@dataclass(frozen=True, slots=True)
class StepResult(Generic[ObsT, InfoT]):
    """What one ``Env.step`` produced.

    - ``observation``: what the policy sees next. When ``done`` it is the final observation (envs keep
      it meaningful, e.g. the last feedback message), never a query to answer.
    - ``reward``: the reward earned by *this* step (0.0 for steps that score nothing). The episode's
      reward is the env's ``metrics()["reward"]`` when the env defines one, else the sum over steps.
    - ``done``: the episode is over (terminated or truncated); ``step`` must not be called again
      before ``reset``.
    - ``info``: the env's typed per-step record (what was parsed from the action, what was scored,
      malformed-input notes). Envs document its type; it is never needed to continue the episode.
    - ``truncated``: ``done`` because a step or call budget ran out rather than by the task's own end.
    """

    observation: ObsT
    reward: float
    done: bool
    info: InfoT
    truncated: bool = False


@runtime_checkable
class Env(Protocol[ObsT, ActT_contra, InfoT]):
    """A stateful, seeded episode. Pure: no network, files or clocks; the same ``reset`` key gives the
    same episode. One env object may be reset and reused for many episodes, one at a time."""

    def reset(self, key: EpisodeKey = None, /) -> ObsT:
        """Start an episode for ``key`` (seed or row id) and return the first observation.

        An env may add keyword-only options with defaults (an epoch, a salt). ``rollout.episode`` passes
        its extra keywords on to them."""
        ...

    def step(self, action: ActT_contra) -> StepResult[ObsT, InfoT]:
        """Apply one agent action. Malformed actions are scored as the env's spec says; they never
        raise. Raises ``RuntimeError`` only for misuse (``step`` before ``reset`` or after ``done``)."""
        ...

    def metrics(self) -> Metrics:
        """Episode-level metrics of the episode so far (reward and the family's behaviour metrics)."""
        ...


# ------------------------------------------------------------------------------------- policies


@runtime_checkable
class Policy(Protocol[ObsT_contra, ActT_co]):
    """Acts on an observation. Stateful policies keep per-episode state and clear it in ``reset``;
    stochastic policies draw only from a generator seeded in ``reset`` (never the global RNG), so a
    (policy, seed, env key) triple replays exactly."""

    def reset(self, seed: int | None = None) -> None:
        """Forget the previous episode; reseed the policy's generator when ``seed`` is given."""
        ...

    def act(self, observation: ObsT_contra, /) -> ActT_co:
        """The action for ``observation`` (the env's action type: centres, a tool call, a JSON reply)."""
        ...


# ------------------------------------------------------------------------------ what a rollout is


@dataclass(frozen=True, slots=True)
class Transition(Generic[ObsT, ActT, InfoT]):
    """One step of an episode: the observation acted on, the action taken and what the env returned."""

    observation: ObsT
    action: ActT
    reward: float
    done: bool
    info: InfoT


@dataclass(frozen=True, slots=True)
class Trajectory(Generic[ObsT, ActT, InfoT]):
    """One episode: its key, the transitions in order, the final observation, and the env's episode
    metrics taken when the episode ended (``metrics["reward"]`` is the episode reward where defined)."""

    key: EpisodeKey
    transitions: tuple[Transition[ObsT, ActT, InfoT], ...]
    final_observation: ObsT
    metrics: Metrics = field(default_factory=dict)

    @property
    def rewards(self) -> list[float]:
        """Per-step rewards, in order (the per-step scores of the episode)."""
        return [t.reward for t in self.transitions]

    @property
    def total_reward(self) -> float:
        """``metrics["reward"]`` when the env reports an episode reward, else the sum of step rewards."""
        reward = self.metrics.get("reward")
        return float(reward) if reward is not None else float(sum(self.rewards))

    def __len__(self) -> int:
        return len(self.transitions)


# ------------------------------------------------------------------- sampling / training backends


class Future(Protocol[ActT_co]):
    """The SDK's future: ``.result()`` blocks until the value is ready."""

    def result(self, timeout: float | None = None) -> ActT_co: ...


def resolve(value: Any) -> Any:
    """A client call's value: the tinker SDK and the local service answer a ``create_*`` or
    ``save_weights_and_get_sampling_client`` call with a future of the client (``.result()``); a backend
    may answer with the client itself. The one place that tells the two apart."""
    result = getattr(value, "result", None)
    return result() if callable(result) else value


class SamplingClient(Protocol):
    """The sampling half of the tinker API the loops use (``tinker.SamplingClient`` satisfies it).
    Arguments and results are ``tinker.types`` objects (``ModelInput``, ``SamplingParams``,
    ``SampleResponse``); they are typed ``Any`` here so this layer does not import the SDK."""

    def sample(self, prompt: Any, num_samples: int, sampling_params: Any) -> Future[Any]:
        """``num_samples`` continuations of ``prompt`` with their per-token logprobs and stop reasons."""
        ...

    def compute_logprobs(self, prompt: Any) -> Future[Sequence[float | None]]:
        """Per-token logprobs of ``prompt`` under the sampler's weights (``None`` for the first token)."""
        ...


class TrainingClient(Protocol):
    """The training half of the tinker API the loops use (``tinker.TrainingClient`` satisfies it)."""

    def forward_backward(self, data: Sequence[Any], loss_fn: str) -> Future[Any]:
        """Loss (``loss_fn`` = ``"cross_entropy"`` or ``"importance_sampling"``) and gradients of a batch
        of ``tinker.types.Datum``; gradients accumulate until ``optim_step``."""
        ...

    def optim_step(self, adam_params: Any) -> Future[Any]:
        """One Adam step (``tinker.types.AdamParams``) on the accumulated gradients."""
        ...

    def save_weights_for_sampler(self, name: str) -> Future[Any]:
        """Snapshot the current weights for sampling; the result carries the snapshot's path."""
        ...

    def save_weights_and_get_sampling_client(self, name: str) -> SamplingClient:
        """Snapshot the current weights and return a sampling client bound to them."""
        ...


class ServiceClient(Protocol):
    """Entry point of a backend (``tinker.ServiceClient`` or the local tinker-compatible one)."""

    def create_lora_training_client(self, base_model: str, rank: int = 32, seed: int | None = None) -> Any:
        """A ``TrainingClient`` for a fresh LoRA of ``rank`` on ``base_model``, initialised from ``seed``."""
        ...


# ---------------------------------------------------------------------------------------- launchers

Backend = Literal["local", "fireworks", "tinker"]
RunState = Literal["pending", "running", "completed", "failed", "cancelled"]
TERMINAL_STATES: frozenset[str] = frozenset({"completed", "failed", "cancelled"})


@runtime_checkable
class ArmSpec(Protocol):
    """One experiment arm as data: everything that changes the experiment's outcome, and nothing that
    does not (implementation settings such as the scorer or rendering stay out of it). Its SHA-256 is
    the SHA-256 of ``to_dict()``'s canonical JSON; the run store keys reuse on it."""

    experiment: str
    arm: str

    def to_dict(self) -> dict[str, Any]: ...


@dataclass(frozen=True, slots=True)
class RunRef:
    """Where a launched run lives: ``runs/<experiment>/<arm>/<run_id>/`` under the store root."""

    experiment: str
    arm: str
    run_id: str
    path: Path
    backend: str


@dataclass(frozen=True, slots=True)
class RunStatus:
    """What a poll found. ``state`` is one of ``RunState``; ``progress`` counts finished units
    (epochs or steps) out of ``total`` when known; ``message`` is the provider's or launcher's own
    words (a failure reason, a stall diagnosis); ``provider`` holds the raw provider fields kept."""

    state: str
    progress: int | None = None
    total: int | None = None
    message: str = ""
    provider: Mapping[str, Any] = field(default_factory=dict)

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL_STATES


@runtime_checkable
class Launcher(Protocol):
    """Turns an arm spec into a run in the run store and reports on it. ``launch`` records the run
    (spec, its hash, provider ids) before anything is paid for, reuses a finished run of the same spec on
    the same backend, and resumes an unfinished one when asked; ``poll`` never raises for a provider's
    bad answer (it reports it in ``RunStatus.message``)."""

    backend: str

    def launch(self, spec: ArmSpec, *, root: Path | str = "runs", resume: bool = True) -> RunRef: ...

    def poll(self, run: RunRef) -> RunStatus: ...
