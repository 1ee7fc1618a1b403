"""The local backend's model: a tiny Qwen3-architecture causal LM (or any local Hugging Face model
directory) with ``peft`` LoRA adapters, and an offline byte-level tokenizer carrying the Qwen chat
special tokens so the tinker-cookbook renderers work without the Hub (docs/platforms.md §3.10).

Built-in base models are deterministic functions of their name: the same name always yields the
same base weights, so every arm of a study starts from the same base. A ``base_model`` that is a
directory is loaded with ``transformers`` (model and tokenizer from that directory).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import torch

# Qwen chat special tokens (the order fixes their ids after the 256 byte symbols).
SPECIAL_TOKENS: tuple[str, ...] = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<think>",
    "</think>",
    "<tool_call>",
    "</tool_call>",
    "<tool_response>",
    "</tool_response>",
)

TINY_MODEL = "rftlab/tiny-qwen3"
"""The default built-in base model: 2 layers, hidden size 64 (about 0.1 M parameters)."""


@dataclass(frozen=True)
class TinyModelSpec:
    """Dimensions and init seed of a built-in base model (a ``Qwen3Config`` with these fields)."""

    hidden_size: int = 64
    intermediate_size: int = 192
    num_hidden_layers: int = 2
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    head_dim: int = 16
    max_position_embeddings: int = 1024
    init_seed: int = 1234
    tokenizer: str = "bpe"
    """``"bpe"`` (the task-trained byte-level BPE, see ``bpe_tokenizer``), ``"agent"`` (the agent tasks' BPE,
    see ``agent_bpe_tokenizer``) or ``"bytes"``."""


BUILTIN_MODELS: dict[str, TinyModelSpec] = {
    TINY_MODEL: TinyModelSpec(),
    "rftlab/tiny-qwen3-wide": TinyModelSpec(hidden_size=128, intermediate_size=384, num_hidden_layers=3),
    "rftlab/tiny-qwen3-bytes": TinyModelSpec(tokenizer="bytes"),
    # the agent tasks (spectrum, poker): their chat-trained BPE and a context one spectrum episode fits in
    "rftlab/tiny-qwen3-agent": TinyModelSpec(max_position_embeddings=8192, tokenizer="agent"),
}
AGENT_MODEL = "rftlab/tiny-qwen3-agent"
"""The built-in model for the multi-turn agent tasks (docs/spectrum.md, "Training through the Tinker API")."""

LORA_ATTN = ("q_proj", "k_proj", "v_proj", "o_proj")
LORA_MLP = ("gate_proj", "up_proj", "down_proj")
LORA_UNEMBED = ("lm_head",)
LORA_ALPHA = 32
"""LoRA alpha (scaling alpha/rank): tinker's LoRA uses alpha 32."""


def byte_tokenizer() -> Any:
    """A byte-level tokenizer (256 byte symbols, no merges) plus the Qwen chat special tokens.

    Every string round-trips (``decode(encode(s)) == s``); ``<|im_end|>`` is the EOS token and
    ``<|endoftext|>`` the pad token, as in Qwen.
    """
    return _cached_byte_tokenizer()


@cache
def _cached_byte_tokenizer() -> Any:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    vocab = {symbol: i for i, symbol in enumerate(alphabet)}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(list(SPECIAL_TOKENS))
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        model_max_length=1024,
    )


BPE_VOCAB = 512
BPE_CORPUS_SEED = 99
BPE_CORPUS_SIZE = 3000


def bpe_tokenizer() -> Any:
    """A byte-level BPE (vocabulary <= 512, digits always single tokens) with the Qwen chat special
    tokens, trained deterministically on a fixed corpus of the local math task (3000 train-stream
    problems with the math_rl question suffix, their solution lines, and the chat-template words).

    Any text still round-trips (all 256 byte symbols are in the vocabulary); the task's prompts are
    about 3x shorter than with ``byte_tokenizer``, which makes sampling and training 3x cheaper."""
    return _cached_bpe_tokenizer()


def train_chat_bpe(corpus: list[str], vocab_size: int, model_max_length: int) -> Any:
    """A deterministic byte-level BPE trained on ``corpus``: at most ``vocab_size`` symbols, digits always
    single tokens, the Qwen chat special tokens, ``<|im_end|>`` as end of sequence. Any text still
    round-trips (all 256 byte symbols are in the vocabulary). The local math task's tokenizer and the arena's
    are this with their own corpus."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus, trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        model_max_length=model_max_length,
    )


@cache
def _cached_bpe_tokenizer() -> Any:
    from rftlab.envs.gs1 import QUESTION_SUFFIX, train_problems

    corpus: list[str] = []
    for p in train_problems(BPE_CORPUS_SIZE, seed=BPE_CORPUS_SEED):
        corpus += [p.question + QUESTION_SUFFIX, p.solution]
    corpus += ["user\n", "assistant\n", "system\n", "\n\n"] * 50
    return train_chat_bpe(corpus, BPE_VOCAB, 1024)


AGENT_BPE_VOCAB = 2048
AGENT_CONTEXT = 8192
AGENT_CORPUS_ROWS = 4  # rows per (prompt, memory) arm of the spectrum task
AGENT_CORPUS_SCANS = 6


def _qwen_turn(role: str, text: str) -> str:
    """One chat-template message as Qwen3 writes it (special tokens are added separately by the trainer)."""
    return f"<|im_start|>{role}\n{text}<|im_end|>\n"


def spectrum_corpus_texts() -> list[str]:
    """The spectrum turn path's chat text, deterministically: for ``AGENT_CORPUS_ROWS`` rows of every
    (prompt, memory) arm, the system prompt, the tool schemas, and ``AGENT_CORPUS_SCANS`` scans of one
    episode whose replies are ``submit_report`` calls (the scan's detected peaks; in the notepad arm a
    ``notepad_write`` first), with the env's tool results and echoes (``rftlab.rollout.spectrum.turns``)."""
    import json

    from rftlab.envs.spectrum.rft import AssistantTurn, SpectrumRFTConfig, SpectrumRFTEnv, ToolCall
    from rftlab.rollout.spectrum.dataset import dataset_rows
    from rftlab.rollout.spectrum.turns import first_messages, followup_messages, system_messages, turn_config

    texts: list[str] = []
    for prompt in ("explicit", "weak"):
        for memory in ("none", "echo", "scrambled", "notepad"):
            config = SpectrumRFTConfig(memory=memory, num_scans=AGENT_CORPUS_SCANS)  # type: ignore[arg-type]
            for row in dataset_rows(AGENT_CORPUS_ROWS, prompt=prompt, memory=memory, config=config):
                meta = row["input_metadata"]
                env = SpectrumRFTEnv(turn_config(meta.get("dataset_info")))
                obs = env.reset(str(meta["row_id"]), salt="corpus")
                texts += [_qwen_turn("system", m["content"]) for m in system_messages(row["messages"])]
                texts += [json.dumps(t["function"]) for t in env.tools()]
                texts += [_qwen_turn("user", m["content"]) for m in first_messages(obs)]
                while not obs.done:
                    freqs = [p["freq_mhz"] for p in obs.peaks]
                    calls = [ToolCall("submit_report", {"center_freqs": freqs})]
                    if memory == "notepad":
                        calls.insert(0, ToolCall("notepad_write", {"text": ", ".join(map(str, freqs))}))
                    reply = "".join(
                        "<tool_call>\n"
                        + json.dumps({"name": c.name, "arguments": c.arguments})
                        + "\n</tool_call>"
                        for c in calls
                    )
                    texts.append(_qwen_turn("assistant", reply))
                    obs = env.step(AssistantTurn(tuple(calls))).observation
                    for m in followup_messages(obs):
                        body = (
                            m["content"]
                            if m["role"] == "user"
                            else f"<tool_response>\n{m['content']}\n</tool_response>"
                        )
                        texts.append(_qwen_turn(m["role"], body))
    return texts


def poker_corpus_texts() -> list[str]:
    """The poker task's chat text the project can build without playing (its dataset rows' system prompts,
    with and without thinking); empty when the poker family is not installed."""
    try:
        from rftlab.rollout.poker.dataset import dataset_rows as poker_rows
    except ImportError:
        return []
    return [
        _qwen_turn("system", m["content"])
        for think in (False, True)
        for row in poker_rows(2, thinking=think)
        for m in row["messages"]
    ]


def agent_corpus(spectrum: bool = True, poker: bool = True) -> list[str]:
    """The agent tokenizer's training corpus: the spectrum chat and the poker text (either may be left
    out), plus the chat-template words. Deterministic: the same code gives the same corpus."""
    corpus = (spectrum_corpus_texts() if spectrum else []) + (poker_corpus_texts() if poker else [])
    return corpus + ["user\n", "assistant\n", "system\n", "tool\n", "\n\n"] * 20


def agent_bpe_tokenizer() -> Any:
    """The agent tasks' byte-level BPE (``train_chat_bpe`` on ``agent_corpus()``, at most 2,048 symbols,
    digits single, an 8,192-token context): a spectrum prompt is several times shorter than with the math
    task's BPE. Any text still round-trips."""
    return _cached_agent_bpe_tokenizer()


@cache
def _cached_agent_bpe_tokenizer() -> Any:
    return train_chat_bpe(agent_corpus(), AGENT_BPE_VOCAB, AGENT_CONTEXT)


TOKENIZERS = {"bpe": bpe_tokenizer, "bytes": byte_tokenizer, "agent": agent_bpe_tokenizer}


def register_builtin_tokenizers() -> None:
    """Register each built-in model's tokenizer under its name with ``tinker_cookbook.tokenizer_utils``,
    so ``get_tokenizer(name)`` (and the cookbook renderers) work offline."""
    from tinker_cookbook.tokenizer_utils import register_tokenizer

    for name, spec in BUILTIN_MODELS.items():
        register_tokenizer(name, TOKENIZERS[spec.tokenizer])


def tokenizer_dir(base_model: str, root: str | os.PathLike[str]) -> str:
    """A local directory ``AutoTokenizer.from_pretrained`` loads ``base_model``'s tokenizer from, offline:
    a local model directory itself, or for a built-in model its tokenizer saved (once, atomically) under
    ``root/tokenizers/<org>--<name>``. Any other name is returned unchanged."""
    if base_model not in BUILTIN_MODELS:
        return str(Path(base_model).resolve()) if os.path.isdir(base_model) else base_model
    target = Path(root) / "tokenizers" / base_model.replace("/", "--")
    if not (target / "tokenizer_config.json").is_file():
        from rftlab.runs.atomic import atomic_directory

        # tokenizer_config.json moves in last: its presence (checked above) means the rest is there
        with atomic_directory(target, last=("tokenizer_config.json",)) as staging:
            TOKENIZERS[BUILTIN_MODELS[base_model].tokenizer]().save_pretrained(str(staging))
        for path in (target.parent, target, *target.rglob("*")):  # private, as the rest of the storage
            if not path.is_symlink():
                os.chmod(path, 0o700 if path.is_dir() else 0o600)
    return str(target.resolve())


def tiny_config(spec: TinyModelSpec, vocab_size: int, pad_token_id: int, eos_token_id: int) -> Any:
    from transformers import Qwen3Config

    # transformers builds Qwen3Config's fields with huggingface_hub's @strict dataclass decorator, which
    # pyright cannot see: it knows only the base PreTrainedConfig's parameters
    return Qwen3Config(
        vocab_size=vocab_size,  # pyright: ignore[reportCallIssue]
        hidden_size=spec.hidden_size,  # pyright: ignore[reportCallIssue]
        intermediate_size=spec.intermediate_size,  # pyright: ignore[reportCallIssue]
        num_hidden_layers=spec.num_hidden_layers,  # pyright: ignore[reportCallIssue]
        num_attention_heads=spec.num_attention_heads,  # pyright: ignore[reportCallIssue]
        num_key_value_heads=spec.num_key_value_heads,  # pyright: ignore[reportCallIssue]
        head_dim=spec.head_dim,  # pyright: ignore[reportCallIssue]
        max_position_embeddings=spec.max_position_embeddings,  # pyright: ignore[reportCallIssue]
        tie_word_embeddings=False,  # pyright: ignore[reportCallIssue]
        pad_token_id=pad_token_id,  # pyright: ignore[reportCallIssue]
        eos_token_id=eos_token_id,  # pyright: ignore[reportCallIssue]
        bos_token_id=None,  # pyright: ignore[reportCallIssue]
    )


def build_tiny_model(name: str = TINY_MODEL, dtype: torch.dtype = torch.float32) -> tuple[Any, Any]:
    """The built-in base model ``name`` (deterministic weights from its init seed) and its tokenizer."""
    from transformers import Qwen3ForCausalLM

    if name not in BUILTIN_MODELS:
        raise ValueError(f"unknown built-in model {name!r}; known: {sorted(BUILTIN_MODELS)}")
    spec = BUILTIN_MODELS[name]
    tokenizer = TOKENIZERS[spec.tokenizer]()
    config = tiny_config(spec, len(tokenizer), tokenizer.pad_token_id, tokenizer.eos_token_id)
    config._attn_implementation = "sdpa"
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(spec.init_seed)
        model = Qwen3ForCausalLM(config)
    # transformers' typing of Module.to on its models is mangled by a decorator (it reads dtype as self)
    return model.to(dtype).eval(), tokenizer  # pyright: ignore[reportArgumentType]


def load_base_model(base_model: str, dtype: torch.dtype = torch.float32) -> tuple[Any, Any]:
    """A built-in model by name, or a local Hugging Face model directory (model and tokenizer)."""
    if base_model in BUILTIN_MODELS:
        return build_tiny_model(base_model, dtype)
    if os.path.isdir(base_model):
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if not os.path.isfile(os.path.join(base_model, "config.json")):
            raise ValueError(f"{base_model} is not a Hugging Face model directory (no config.json)")
        model = AutoModelForCausalLM.from_pretrained(base_model, dtype=dtype)
        tokenizer = AutoTokenizer.from_pretrained(base_model)
        return model.eval(), tokenizer
    raise ValueError(
        f"base model {base_model!r} is neither a built-in local model ({', '.join(sorted(BUILTIN_MODELS))}) "
        "nor a local Hugging Face model directory"
    )


def lora_targets(model: Any, train_mlp: bool, train_attn: bool, train_unembed: bool) -> list[str]:
    """The module-name suffixes to wrap with LoRA that exist in ``model``."""
    wanted: list[str] = []
    if train_attn:
        wanted += LORA_ATTN
    if train_mlp:
        wanted += LORA_MLP
    if train_unembed:
        wanted += LORA_UNEMBED
    present = {
        name.rsplit(".", 1)[-1] for name, mod in model.named_modules() if isinstance(mod, torch.nn.Linear)
    }
    targets = [t for t in wanted if t in present]
    if not targets:
        raise ValueError("no LoRA target module found (expected Qwen/Llama-style projection names)")
    return targets


def attach_lora(
    model: Any,
    rank: int,
    seed: int,
    train_mlp: bool = True,
    train_attn: bool = True,
    train_unembed: bool = True,
) -> Any:
    """Wrap ``model`` with fresh LoRA adapters of ``rank`` (``A`` from ``seed``, ``B`` zero), base frozen."""
    from peft import LoraConfig, get_peft_model

    if rank < 1:
        raise ValueError(f"LoRA rank must be >= 1, got {rank}")
    config = LoraConfig(
        r=rank,
        lora_alpha=LORA_ALPHA,
        lora_dropout=0.0,
        target_modules=lora_targets(model, train_mlp, train_attn, train_unembed),
        bias="none",
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        peft_model = get_peft_model(model, config)
    peft_model.eval()
    return peft_model


def lora_parameters(peft_model: Any) -> dict[str, torch.nn.Parameter]:
    """The trainable (LoRA) parameters by a short stable name (peft's prefix removed)."""
    prefix = "base_model.model."
    return {
        (name[len(prefix) :] if name.startswith(prefix) else name): p
        for name, p in peft_model.named_parameters()
        if p.requires_grad
    }
