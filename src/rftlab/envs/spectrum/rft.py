"""BSM-RFT: the memory-training variant (docs/spectrum.md Part B) — the env.

One random band per dataset row (11–14 channels of 8 MHz in a 180 MHz band), seeded from the row id and
an optional epoch salt so every GRPO candidate of a row faces the same band and no band repeats across
epochs; 12 scans with ``n_active = 3``; the CLBench detector noise; occupied-IoU on the 0.5 MHz raster
(the reward signal) and available-IoU (tracked); memory channels ``none`` / ``echo`` (running list) /
``scrambled`` (control) / ``notepad`` (tools), and ICL-off windowing.

    env = SpectrumRFTEnv(SpectrumRFTConfig(memory="echo"))
    obs = env.reset("sc1_0", epoch=3)
    result = env.step([31.5, 77.0])       # a list of centres = submit_report; StepResult, info: SpectrumStepInfo
    env.metrics()                         # reward, memory_gain, carry_rate, ...
    rftlab.rollout.episode(env, policy, "sc1_0", epoch=3)   # the whole episode

``step`` takes one model call: a list of centre frequencies (shorthand for ``submit_report``), a
``ToolCall`` / tool-call mapping, an ``AssistantTurn`` (all tool calls of one assistant message), or
anything else (a turn without a usable tool call). It never raises on malformed model input; what was
done with the input is in ``info`` (the rules are in ``rftlab.envs.spectrum.actions``).

The env is split by job: ``layout`` (band seeds, layouts, scans), ``actions`` (reading model calls and
``center_freqs``), ``config`` (``SpectrumRFTConfig``), ``observation`` (tool schemas, observations, echo,
windowing) and this module (the episode). The names other code imports from ``rftlab.envs.spectrum.rft``
are re-exported here.

Cached: ``_band_scorers`` (``functools.lru_cache``, 256 entries) keeps the (occupied, available) scorers
of recent bands, shared by the candidates of a GRPO group; scorers are read-only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

from rftlab.envs.spectrum.actions import (
    MAX_REPORT,
    AssistantTurn,
    ReportNote,
    ToolCall,
    decode_arguments,
    interpret_turn,
    load_model_json,
    normalize_center_freqs,
    submit,
)
from rftlab.envs.spectrum.config import (
    IMPLEMENTATION_FIELDS,
    MAX_CALLS_PER_SCAN,
    MEMORY_CHANNELS,
    NOTEPAD_MAX_CHARS,
    MemoryChannel,
    SpectrumRFTConfig,
)
from rftlab.envs.spectrum.layout import (
    CH_BW,
    NUM_SCANS,
    RFT_BAND,
    RFT_PARAMS,
    BandLayout,
    band_seed,
    episode_band,
    epoch_salt,
    generate_episode_scans,
    random_layout,
    scramble_seed,
    scrambled_list,
    session_band_seed,
)
from rftlab.envs.spectrum.observation import (
    RUNNING_LIST_HEADER,
    SCAN_MARKER,
    SpectrumObservation,
    echo_items,
    tool_schemas,
    window_messages,
)
from rftlab.envs.spectrum.render import (
    SpectrumText,
    compose_prompt,
    render_instance,
    resolve_text,
    timestamp_utc,
)
from rftlab.rewards.spectrum import AvailableScorer, OccupiedBitset, episode_metrics, score_line
from rftlab.types import StepResult

__all__ = [
    "CH_BW",
    "IMPLEMENTATION_FIELDS",
    "MAX_CALLS_PER_SCAN",
    "MAX_REPORT",
    "MEMORY_CHANNELS",
    "NOTEPAD_MAX_CHARS",
    "NUM_SCANS",
    "RFT_BAND",
    "RFT_PARAMS",
    "RUNNING_LIST_HEADER",
    "SCAN_MARKER",
    "AssistantTurn",
    "BandLayout",
    "MemoryChannel",
    "ReportNote",
    "SpectrumObservation",
    "SpectrumRFTConfig",
    "SpectrumRFTEnv",
    "SpectrumStepInfo",
    "ToolCall",
    "band_seed",
    "decode_arguments",
    "episode_band",
    "epoch_salt",
    "generate_episode_scans",
    "interpret_turn",
    "load_model_json",
    "normalize_center_freqs",
    "random_layout",
    "scramble_seed",
    "scrambled_list",
    "session_band_seed",
    "submit",
    "tool_schemas",
    "window_messages",
]


@dataclass(frozen=True, slots=True)
class SpectrumStepInfo:
    """The typed per-step record of ``SpectrumRFTEnv.step`` (``StepResult.info``).

    - ``scan``: the scan (1-based) this call acted on.
    - ``scored``: a ``submit_report`` was scored in this call; then ``occ`` / ``avail`` are its exact
      occupied-IoU / available-IoU and ``score_line`` the line shown to the model.
    - ``forced``: the env advanced with an empty, unscored report (no submit in a call without tool
      calls, or the scan's call budget ran out; B.9); ``occ`` / ``avail`` are then the (unrewarded)
      scores of that empty report, ``score_line`` is ``None``.
    - neither: no scan ended in this call (a notepad call); ``occ`` / ``avail`` / ``score_line`` are
      ``None``.
    - ``truncated``: the episode's total call budget ran out in this call.
    - ``actions``: one ``ReportNote`` per scored submit (what was kept, converted, dropped).
    - ``tool_errors``: the error texts returned to the model in this call (unknown tool, bad arguments,
      extra submit).
    """

    scan: int
    scored: bool = False
    forced: bool = False
    truncated: bool = False
    occ: float | None = None
    avail: float | None = None
    score_line: str | None = None
    actions: tuple[ReportNote, ...] = ()
    tool_errors: tuple[str, ...] = ()


@lru_cache(maxsize=256)
def _band_scorers(
    regions: tuple[tuple[float, float], ...], band: float
) -> tuple[OccupiedBitset, AvailableScorer]:
    """The band's (occupied, available) scorers; read-only after construction."""
    return OccupiedBitset(regions, band), AvailableScorer(regions, band)


@dataclass
class _CallRun:
    """What the tool calls of one model turn produced so far (``SpectrumRFTEnv.step``)."""

    tool_errors: list[str] = field(default_factory=list)
    notes: list[ReportNote] = field(default_factory=list)
    results: list[dict[str, Any]] = field(default_factory=list)
    reward: float = 0.0
    occ: float | None = None
    avail: float | None = None
    line: str | None = None
    submitted: int = 0
    next_scan: str | None = None  # the latest scan rendered for delivery during this turn


class SpectrumRFTEnv:
    """The BSM-RFT episode. Pure: everything follows from (config, row id, salt)."""

    def __init__(self, config: SpectrumRFTConfig | None = None, *, text: SpectrumText | None = None):
        self.config = config or SpectrumRFTConfig()
        self.text = text if text is not None else resolve_text(self.config.text)
        self._brief = self.text.brief.render()
        self._marker = f"{SCAN_MARKER} {self.text.rft_marker_notes[self.config.memory]}\n"
        self._tool_names = frozenset(self.config.tool_names())
        self._started = False
        self.done = True

    # -------------------------------------------------------------- episode setup

    def reset(
        self,
        row_id: Any = None,
        *,
        epoch: int | None = None,
        salt: str | None = None,
        seed: int | None = None,
    ) -> SpectrumObservation:
        """Start an episode. The band seed is ``seed`` when given (e.g. ``session_band_seed``), else
        ``band_seed(row_id, salt)`` where ``salt`` defaults to ``epoch_salt(namespace, epoch)`` when an
        epoch is given and to ``""`` (upstream's unsalted bands) otherwise."""
        cfg = self.config
        if seed is None:
            if row_id is None:
                raise ValueError("reset needs a row_id (or an explicit seed)")
            if salt is None:
                salt = epoch_salt(cfg.salt_namespace, epoch) if epoch is not None else ""
            seed = band_seed(row_id, salt)
        self.row_id = row_id
        self.epoch = epoch
        self.salt = salt or ""
        self.band_seed = int(seed)
        self.layout, self.scans, self._blocks = episode_band(
            self.band_seed, cfg.band_width, cfg.num_scans, cfg.params
        )
        self._gt_regions = self.layout.regions()
        self._occ, self._avail = _band_scorers(tuple(self._gt_regions), cfg.band_width)
        self.scan_index = 0
        self.notepad = ""
        self.records: list[dict[str, Any]] = []
        self.transcript: list[dict[str, Any]] = []
        self._calls_this_scan = 0
        self._total_calls = 0
        self._last_report: list[float] = []
        self._last_line: str | None = None
        self._current_echo: list[float] | None = None
        self._reads = 0
        self._writes = 0
        self._started = True
        self.done = False
        text = self._deliver()
        if cfg.render:
            self.transcript.append({"role": "user", "content": text, "scan_boundary": True})
        return self._observation(text, [])

    # -------------------------------------------------------------- rendering

    def _scan_prompt(self, k: int) -> str:
        block = self._blocks[k]
        if block is None:
            block = self._blocks[k] = render_instance(
                self.scans[k],
                scan_num=k + 1,
                stated_horizon=self.config.num_scans,
                timestamp=timestamp_utc(k),
                band_start=0.0,
                band_end=self.config.band_width,
            )
        return compose_prompt(self._brief, self.text.rft_instruction, block) if k == 0 else block

    def marker(self) -> str:
        """The line prefixed to every delivered scan: ``[[SCAN_BOUNDARY]] <note>\\n``."""
        return self._marker

    def _echo_list(self) -> list[float] | None:
        """The list displayed with the current scan (``None`` when no echo is shown)."""
        if not self.config.echo or self.scan_index == 0 or not self._last_report:
            return None
        if self.config.memory == "scrambled":
            return scrambled_list(
                self.band_seed, self.scan_index + 1, len(self._last_report), self.salt, self.config.band_width
            )
        return self._last_report

    def _deliver(self) -> str:
        """Render the current scan as delivered: marker + scan [+ running list] [+ previous score line].
        With ``render=False`` only the displayed echo is computed and ``""`` is returned."""
        cfg = self.config
        shown = self._echo_list()
        if not cfg.render:
            # the displayed value parsed back, float(f"{x:.1f}"), which is also round(x, 1)
            self._current_echo = None if shown is None else echo_items(shown)[1]
            return ""
        k = self.scan_index
        block = self._blocks[k]
        if k == 0 or block is None:
            block = self._scan_prompt(k)
        if shown is not None:
            items, self._current_echo = echo_items(shown)
            text = (
                f"{self._marker}{block}\n{RUNNING_LIST_HEADER}\n{', '.join(items)}\n"
                f"{self.text.rft_echo_instruction}\n"
            )
        else:
            self._current_echo = None
            text = self._marker + block
        if cfg.show_scores and self._last_line is not None:
            text += "\n" + self._last_line
        return text

    def _observation(self, text: str | None, tool_results: list[dict[str, Any]]) -> SpectrumObservation:
        k = self.scan_index if self.scan_index < self.config.num_scans else self.config.num_scans - 1
        return SpectrumObservation(
            text,
            k + 1,
            self.config.num_scans,
            tool_results,
            self.done,
            self._current_echo,
            self.scans[k],
            self.layout.centers,
        )

    # -------------------------------------------------------------- scoring

    def score_report(self, centres: Sequence[float]) -> tuple[float, float]:
        """``(occupied-IoU, available-IoU)`` of a report of 8 MHz regions against this episode's band."""
        occ = self._occ.score(centres, CH_BW) if centres else 0.0
        return occ, self._avail.score(centres, CH_BW)

    # -------------------------------------------------------------- stepping

    def tools(self) -> list[dict[str, Any]]:
        return tool_schemas(self.config)

    def step(self, action: Any) -> StepResult[SpectrumObservation, SpectrumStepInfo]:
        """One model call → ``StepResult(observation, reward, done, info: SpectrumStepInfo)``. ``reward`` is
        the scan's exact occupied-IoU when a report was scored in this call, else ``0.0``
        (``info.scored`` says which); the episode reward is ``metrics()["reward"]``."""
        if not self._started:
            raise RuntimeError("call reset(row_id) before step()")
        if self.done:
            raise RuntimeError("episode finished: call reset() to start a new one")
        cfg = self.config
        self._calls_this_scan += 1
        self._total_calls = n_call = self._total_calls + 1
        calls, content = interpret_turn(action)
        if cfg.render:
            self.transcript.append(
                {
                    "role": "assistant",
                    "content": content,
                    "tool_calls": [
                        {"id": c.id, "name": c.name, "arguments": c.arguments} if c else {"invalid": True}
                        for c in calls
                    ],
                }
            )
        run = _CallRun()
        for idx, call in enumerate(calls):
            self._run_call(call, (call.id if call else None) or f"call_{n_call}_{idx}", run)
        forced = self._force_advance_if_idle(run, bool(calls))
        if run.submitted or forced:
            self._calls_this_scan = 0  # a submit (or a forced advance) ends the scan's call budget
        truncated = False
        if cfg.max_total_calls is not None and n_call >= cfg.max_total_calls and not self.done:
            self.done = truncated = True
            run.next_scan = None
        if cfg.render:
            self.transcript.extend(run.results)
            if run.next_scan is not None and (cfg.delivery == "user" or not run.submitted):
                # user delivery: every scan is a user message; tool delivery: scans ride in the submit
                # result, except after a forced advance (no submit result to carry it)
                self.transcript.append({"role": "user", "content": run.next_scan, "scan_boundary": True})
        info = SpectrumStepInfo(
            self.records[-1]["scan"] if (run.submitted or forced) else self.scan_index + 1,
            bool(run.submitted),
            forced,
            truncated,
            run.occ,
            run.avail,
            run.line,
            tuple(run.notes),
            tuple(run.tool_errors),
        )
        return StepResult(
            self._observation(run.next_scan, run.results), run.reward, self.done, info, truncated
        )

    def _run_call(self, call, call_id: str, run: _CallRun) -> None:
        """Run one tool call of a model turn, in order: a nameless or unavailable tool is an error result;
        the notepad tools read or write; ``submit_report`` scores the scan and delivers the next one."""
        cfg = self.config
        if call is None:
            self._error(run.tool_errors, run.results, call_id, "error: tool call without a name")
            return
        name = call.name
        if name not in self._tool_names:
            names = ", ".join(cfg.tool_names())
            msg = f"error: tool {name!r} is not available (tools: {names})"
            self._error(run.tool_errors, run.results, call_id, msg)
            return
        args, arg_err = decode_arguments(call.arguments)
        if arg_err:
            run.tool_errors.append(f"{name}: {arg_err}")
        if name == "notepad_read":
            run.results.append(self._tool_result(call_id, self.notepad or self.text.rft_notepad_empty))
            self._reads += 1
        elif name == "notepad_write":
            raw = args.get("text")
            self.notepad = str(raw if raw is not None else "")[: cfg.notepad_max_chars]
            run.results.append(self._tool_result(call_id, "ok"))
            self._writes += 1
        elif run.submitted and cfg.multi_submit == "first":
            msg = "error: this scan's report was already submitted; extra submit ignored"
            self._error(run.tool_errors, run.results, call_id, msg)
        elif self.done:
            self._error(run.tool_errors, run.results, call_id, "error: all scans are completed")
        else:
            centres, note = normalize_center_freqs(
                args.get("center_freqs"), max_report=cfg.max_report, band=cfg.band_width
            )
            if arg_err and note.malformed == "center_freqs missing":
                note = replace(note, malformed=arg_err)
            run.occ, run.avail = self._score_and_advance(centres, note, submitted=True)
            run.line = self._last_line
            run.submitted += 1
            run.reward = run.occ
            run.notes.append(note)
            run.next_scan = None if self.done else self._deliver()
            run.results.append(self._submit_result(call_id, run.line, run.next_scan))

    def _force_advance_if_idle(self, run: _CallRun, any_calls: bool) -> bool:
        """No submit in this turn: a turn with no tool call, or the last call of the scan's budget, advances
        with an empty, unscored report (docs/spectrum.md §B.9). Returns whether it did."""
        if run.submitted:
            return False
        cfg = self.config
        out_of_calls = cfg.max_calls_per_scan is not None and self._calls_this_scan >= cfg.max_calls_per_scan
        if any_calls and not out_of_calls:
            return False
        run.occ, run.avail = self._score_and_advance([], ReportNote(malformed="no submit"), submitted=False)
        run.next_scan = None if self.done else self._deliver()
        return True

    def _submit_result(self, call_id: str, line: str | None, next_scan: str | None) -> dict[str, Any]:
        """The tool result of a scored ``submit_report``: ``ok`` + score line (user delivery), or the next
        scan [+ score line] (tool delivery)."""
        cfg = self.config
        if cfg.delivery == "tool":
            body = next_scan if next_scan is not None else ("" if cfg.show_scores else "All scans completed.")
            text = body + (f"\n{line}" if cfg.show_scores else "")
            return self._tool_result(call_id, text, score=cfg.show_scores, boundary=next_scan is not None)
        # the dict _tool_result(call_id, f"ok\n{line}", score=True) builds, same keys in the same order
        return {"role": "tool", "tool_call_id": call_id, "content": f"ok\n{line}", "score_line": True}

    def _error(self, errors: list[str], results: list[dict[str, Any]], call_id: str, msg: str) -> None:
        errors.append(msg)
        results.append(self._tool_result(call_id, msg))

    @staticmethod
    def _tool_result(
        call_id: str, content: str, *, score: bool = False, boundary: bool = False
    ) -> dict[str, Any]:
        msg: dict[str, Any] = {"role": "tool", "tool_call_id": call_id, "content": content}
        if score:
            msg["score_line"] = True
        if boundary:
            msg["scan_boundary"] = True
        return msg

    def _score_and_advance(self, centres: list[float], note: ReportNote, *, submitted: bool):
        # = self.score_report(centres), without the extra call
        occ = self._occ.score(centres, CH_BW) if centres else 0.0
        avail = self._avail.score(centres, CH_BW)
        line = score_line(occ, avail) if submitted else None
        self.records.append(
            {
                "scan": self.scan_index + 1,
                "submitted": submitted,
                "forced": not submitted,
                "report": centres if submitted else None,
                "echo": self._current_echo,
                "occ": occ,
                "avail": avail,
                "score_line": line,
                "action": note,
                "notepad_reads": self._reads,
                "notepad_writes": self._writes,
                "notepad_chars": len(self.notepad),
            }
        )
        self._reads = self._writes = 0
        # the echo shows the previous report (after the cap); a forced empty step clears it (B.15 #6)
        self._last_report = centres
        self._last_line = line
        self.scan_index += 1
        if self.scan_index >= self.config.num_scans:
            self.done = True
        return occ, avail

    # -------------------------------------------------------------- model input and metrics

    def model_input(self, system_messages: Iterable[Mapping[str, Any]] = ()) -> list[dict[str, Any]]:
        """The policy's input: system messages + (ICL-off) the messages from the current scan's delivery
        onward, or (``window=False``) the whole transcript."""
        msgs = [dict(m) for m in system_messages]
        return msgs + window_messages(self.transcript, window=self.config.window)

    def metrics(self, tau: float | None = None) -> dict[str, Any]:
        """Reward and memory metrics of the episode so far (``rftlab.rewards.spectrum.episode_metrics``)."""
        kwargs = {} if tau is None else {"tau": tau}
        m = episode_metrics(self.records, **kwargs)
        m.update(
            band_seed=self.band_seed,
            salt=self.salt,
            channels_drawn=self.layout.drawn,
            channels_placed=self.layout.placed,
            notepad_writes=sum(r["notepad_writes"] for r in self.records),
            notepad_reads=sum(r["notepad_reads"] for r in self.records),
        )
        return m
