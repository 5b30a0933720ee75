"""The lazy validate path: a forward and a greedy decode that read only what each token needs.

Built for checkpoints far larger than memory (K3: 93 layers, 1.45 TB; one token touches 137 GB). The
model is archprobe.nn's (HybridDecoder's layer loop, AttnRes, KDA, MLA, caches), built on the meta
device, with three substitutions made from the checkpoint's names:

* every float matrix of a Linear (and the router) of at least `STREAM_MIN_BYTES` becomes a
  `StreamedLinear`: it keeps only the tensor's name and reads its rows a chunk at a time at each call;
* the routed experts become a `LazyExpertBank` (validate/lazy_experts.py): only routed experts are read;
* the embedding becomes `LazyEmbedding`: only the rows of the token ids are read.
Everything smaller (norms, conv kernels, biases, A_log, AttnRes queries) is read once and kept.

Decoding runs token by token with the caches (KDA state and conv window, MLA latent cache): every
decoded token is one more streamed pass, which is what decoding a model that does not fit in memory
costs. `LazyModel.token_needs()` counts, from the headers and the routing record, the bytes the last
forward needed, so the bytes actually read can be compared with them.

Names come from where the eager path takes them: the card's blueprint (validate/build.py). Layouts the
card says need a tensor split, transposed or stacked before use (a blueprint part's sources,
validate/layouts.py) are refused (a one-line Unsupported naming the first); sources stored but never read
(`Layout.UNUSED`) are skipped as the eager path skips them; quantized non-expert weights are read once and
kept, dequantized.
"""

from __future__ import annotations

import time

import torch
from torch import nn

from archprobe.validate.layouts import Layout
from archprobe.validate.lazy_experts import PROJECTIONS, LazyExpertBank, LazyMoE
from archprobe.validate.lazy_io import ByteReader, ShardIndex
from archprobe.validate.plan import Unsupported
from archprobe.validate.streamed_matmul import dense_matmul

STREAM_MIN_BYTES = 1 << 18      # matrices at least this large are read at each use, never kept (one-row
                                # matrices, AttnRes pseudo-queries, always stay: layer 0 never uses its own)
FLOAT_DTYPES = ("BF16", "F16", "F32")


class StreamedLinear(nn.Module):
    """A bias-optional Linear whose weight stays on disk: y = x @ W.T + b, W read in row chunks per call."""

    def __init__(self, reader: ByteReader, name: str, dtype: torch.dtype, bias: torch.Tensor | None = None):
        super().__init__()
        self.reader, self.name, self.dtype = reader, name, dtype
        self.out_features, self.in_features = reader.index[name].shape
        self.bias = None if bias is None else bias.to(dtype)

    @property
    def weight(self) -> torch.Tensor:
        """The whole matrix (read now; for code that needs the weight itself, e.g. MLA's kv_b_proj)."""
        return self.reader.read(self.name).to(self.dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        y = dense_matmul(x.reshape(-1, self.in_features).to(self.dtype), self.reader, self.name)
        if self.bias is not None:
            y = y + self.bias
        return y.reshape(*shape[:-1], self.out_features)


class LazyEmbedding(nn.Module):
    """An embedding table that reads only the rows of the ids it is given."""

    def __init__(self, reader: ByteReader, name: str, dtype: torch.dtype):
        super().__init__()
        self.reader, self.name, self.dtype = reader, name, dtype
        self.num_embeddings, self.embedding_dim = reader.index[name].shape
        self.rows_read = 0

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        unique, inverse = torch.unique(ids, return_inverse=True)
        rows = self.reader.read_row_list(self.name, unique.tolist()).to(self.dtype)
        self.rows_read += len(unique)
        return rows[inverse]


def plan(folder: str, loaded=None) -> tuple[object, dict, str, list[str]]:
    """(HybridConfig, {layer or None: {module name: checkpoint name}}, folder, shard files) from the card,
    exactly as the eager path plans it (validate.load + validate.build.blueprint). `loaded`: the eager
    path's own load (its --card overrides and settled norm offsets); without it, loaded here likewise."""
    from archprobe.validate.build import blueprint
    from archprobe.validate.load import load
    from archprobe.validate.norm_gains import check_norm_gains

    if loaded is None:
        loaded = load(folder)
        with loaded.reader.session() as get:
            loaded.card, _ = check_norm_gains(loaded.card, get)
    bp = blueprint(loaded.card, loaded.reader.all_shapes(loaded.card.tensors.values()))
    odd = next((d.target for p in bp.parts.values() for d in p.derived), None)
    if odd is not None:
        raise Unsupported(f"{odd}: the lazy path reads tensors as stored, and the card derives this one")
    laid = next((n for p in bp.parts.values() for s, n in p.sources.items() if s.layout is not Layout.UNUSED), None)
    if laid is not None:
        raise Unsupported(f"{laid}: the lazy path reads tensors as stored, and the card stores this one in a layout")
    files = sorted({f for fs in loaded.reader.files.values() for f in fs})
    return bp.config, {k: dict(p.names) for k, p in bp.parts.items()}, loaded.folder, files


class LazyModel:
    """A HybridDecoder whose large weights stay in the shards; see the module docstring."""

    def __init__(self, folder: str, dtype: torch.dtype = torch.float32, stream_min_bytes: int = STREAM_MIN_BYTES,
                 loaded=None):
        """`stream_min_bytes`: matrices at least this large are streamed (0: every float matrix); `loaded`:
        see plan()."""
        from archprobe.nn.decoder import HybridDecoder

        t0 = time.perf_counter()
        cfg, parts, base, files = plan(folder, loaded)
        if cfg.expert_bias:
            raise Unsupported("experts with biases (gpt-oss) are not streamed")
        self.config, self.dtype, self.stream_min_bytes = cfg, dtype, stream_min_bytes
        self.index = ShardIndex(base, files)
        self.reader = ByteReader(self.index)
        self.streamed: list[str] = []       # checkpoint names read whole at every forward
        self.banks: dict[int, LazyExpertBank] = {}
        self.moes: dict[int, LazyMoE] = {}
        with torch.device("meta"):
            self.decoder = HybridDecoder(cfg, build_layers=False).to(dtype).eval()
        self._fill(self.decoder, parts.get(None, {}), None)
        self.layers = [self._layer(i, parts.get(i, {})) for i in range(cfg.num_hidden_layers)]
        self.resident_bytes = self.reader.bytes_read
        self.build_seconds = time.perf_counter() - t0
        self.rows_before = 0

    # -- building -------------------------------------------------------------------------------------
    def _layer(self, i: int, names: dict) -> nn.Module:
        from archprobe.nn.decoder import DecoderLayer

        with torch.device("meta"):
            layer = DecoderLayer(self.config.layer_spec(i)).to(self.dtype).eval()
        self._fill(layer, names, i)
        return layer

    def _fill(self, module: nn.Module, names: dict, layer: int | None) -> None:
        """Stream the large matrices, bank the experts, read the rest; then load strictly."""
        from archprobe.nn.loading import EXPERT_LEAVES, EXPERT_RE, load_strict, sanitize
        from archprobe.nn.moe import MoE, Router
        from archprobe.validate.quant import lazy_dequantize

        streamed: dict[str, str] = {}
        resident: dict[str, str] = {}
        experts: dict[int, dict[str, dict]] = {}
        for mod_name, ckpt in names.items():
            m = EXPERT_RE.match(mod_name)
            if m and m.group("leaf") in EXPERT_LEAVES:
                proj = EXPERT_LEAVES[m.group("leaf")].removesuffix("_proj")
                experts.setdefault(int(m.group("e")), {}).setdefault(proj, {})[m.group("part") or ""] = ckpt
                continue
            path, _, leaf = mod_name.rpartition(".")
            span = self.index[ckpt]
            if layer is None and mod_name == "embed_tokens.weight":
                streamed["embed_tokens"] = ckpt        # only the rows of the ids are ever read
                continue
            owner = _submodule(module, path)
            if (leaf == "weight" and isinstance(owner, (nn.Linear, Router)) and span.dtype in FLOAT_DTYPES
                    and len(span.shape) == 2 and span.shape[0] > 1 and span.nbytes >= self.stream_min_bytes):
                streamed[path] = ckpt
            else:
                resident[mod_name] = ckpt
        if layer is None and self.config.tie_word_embeddings and "embed_tokens" in streamed:
            streamed.setdefault("lm_head", streamed["embed_tokens"])
        state = sanitize(lazy_dequantize(resident, self.reader.read, self.dtype))
        moe = getattr(module, "block_sparse_moe", None)
        selection_bias = None
        if isinstance(moe, MoE):
            if "block_sparse_moe.gate" in streamed:    # the bias leaves with the Router it belonged to
                selection_bias = state.pop("block_sparse_moe.gate.e_score_correction_bias", None)
            moe.experts = nn.Module()
        for path, ckpt in streamed.items():
            if path == "embed_tokens":
                new = LazyEmbedding(self.reader, ckpt, self.dtype)
            else:
                owner = _submodule(module, path)
                bias = state.pop(path + ".bias", None)
                dtype = torch.float32 if isinstance(owner, Router) else self.dtype
                new = StreamedLinear(self.reader, ckpt, dtype, bias)
            module.set_submodule(path, new)
            if path != "embed_tokens":     # the embedding's need is its rows, counted apart
                self.streamed.append(ckpt)
        load_strict(module, state, what="model-level tensors" if layer is None else f"layer {layer}", assign=True)
        if isinstance(moe, MoE):
            bank = LazyExpertBank(self.reader, _expert_table(experts, layer), self.config.hidden_act,
                                  self.config.gated_ffn, (self.config.activation_situ_beta,
                                                          self.config.activation_situ_linear_beta),
                                  self.config.glu_limit)
            if not isinstance(moe.gate, StreamedLinear):   # a small router stays resident, bias and all
                selection_bias = getattr(moe.gate, "e_score_correction_bias", None)
            lazy = LazyMoE(moe, bank, moe.gate, selection_bias)
            module.block_sparse_moe = lazy
            self.banks[layer], self.moes[layer] = bank, lazy

    # -- running --------------------------------------------------------------------------------------
    @torch.no_grad()
    def forward(self, ids: torch.Tensor, caches=None, start: int = 0, all_positions: bool = False):
        """(logits [B, T or 1, V] float32, caches). `start`: the position of ids[0] (decoding)."""
        for bank in self.banks.values():
            bank.take_used()
        x = self.decoder.embed(ids, start)
        h, caches = self.decoder.hidden_states(x, caches, use_cache=True, layers=self.layers)
        return self.decoder.logits(h if all_positions else h[:, -1:]).float(), caches

    def token_needs(self, embed_rows: int) -> int:
        """Bytes the last forward needed, from the headers: every streamed matrix once, each routed
        expert's tensors once per layer, `embed_rows` embedding rows (resident tensors excluded)."""
        need = sum(self.index[n].nbytes for n in self.streamed)
        for bank in self.banks.values():
            for e in set(bank.used):
                need += sum(self.index[n].nbytes for n in bank.names(e))
        return need + embed_rows * self.index[self._embed_name()].row_bytes

    def routed(self) -> dict[int, list[int]]:
        """Layer -> the experts the last forward ran (sorted)."""
        return {i: sorted(set(b.used)) for i, b in self.banks.items()}

    def _embed_name(self) -> str:
        return self.decoder.embed_tokens.name

    @torch.no_grad()
    def generate(self, prompt: list[int], new_tokens: int, on_token=None) -> list[dict]:
        """Greedy decoding with the caches; one record per forward (the prompt's, then each token's):
        token, seconds, bytes read, bytes needed (the headers' count) and the routed experts."""
        records = []
        ids = torch.tensor([prompt])
        caches, pos = None, 0
        for step in range(new_tokens + 1):
            before, rows0 = self.reader.bytes_read, self.decoder.embed_tokens.rows_read
            t = time.perf_counter()
            logits, caches = self.forward(ids, caches, start=pos)
            seconds = time.perf_counter() - t
            pos += ids.shape[1]
            token = int(logits[0, -1].argmax())    # ties: the lowest id (argmax returns the first maximum)
            rows = self.decoder.embed_tokens.rows_read - rows0
            rec = {"step": step, "input": ids[0].tolist(), "next_token": token, "seconds": seconds,
                   "bytes_read": self.reader.bytes_read - before, "bytes_needed": self.token_needs(rows),
                   "experts": self.routed(), "finite": bool(torch.isfinite(logits).all())}
            records.append(rec)
            if on_token:
                on_token(rec)
            ids = torch.tensor([[token]])
        return records

    def close(self) -> None:
        self.reader.close()


def _submodule(module: nn.Module, path: str):
    try:
        return module.get_submodule(path) if path else module
    except AttributeError:
        return None


def _expert_table(experts: dict[int, dict[str, dict]], layer) -> dict[int, dict[str, tuple]]:
    """{e: {proj: {"", "_packed", "_scale": name}}} -> the bank's {e: {proj: ("mxfp4"|"dense", ...)}}."""
    table: dict[int, dict[str, tuple]] = {}
    for e, projs in experts.items():
        row = {}
        for proj, parts in projs.items():
            if "_packed" in parts and "_scale" in parts:
                row[proj] = ("mxfp4", parts["_packed"], parts["_scale"])
            elif "" in parts:
                row[proj] = ("dense", parts[""])
            else:
                raise Unsupported(f"layer {layer} expert {e} {proj}: stored in a form the lazy path does not read")
        missing = [p for p in PROJECTIONS if p not in row and not (p == "gate" and "up" in row and len(row) == 2)]
        if missing:
            raise Unsupported(f"layer {layer} expert {e}: no {missing[0]} projection")
        table[e] = row
    return table
