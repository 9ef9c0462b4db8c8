"""Random-token sequences with a recurring segment: the task that induction heads solve.

Each sequence is BOS (id 0) then uniform random tokens from 1..vocab_size-1, in which one segment
of random length (min_segment..max_segment) starting at a random position recurs at a random later
position. The second copy can be predicted only by finding the earlier occurrence of the current
token and reading the token after it (an induction head); with random offsets no "attend to
position i - k" shortcut does it. `fixed_offset=k` is the documented control: the copy always
starts k positions after the original, so a purely positional head solves it too.

`induction_probe` is Olsson et al.'s (2022) probe: a block of random tokens, then the same block
again (optionally with random filler between, so the repeat distance varies); on it the
previous-token, duplicate and induction targets are unambiguous, and the loss on the second
block falls to ~0 once induction works.
"""

from __future__ import annotations

import torch
from torch import Tensor

from headlab.config.values import check_int
from headlab.errors import ConfigError, DataError

BOS_ID = 0


def check_repeat_keys(vocab_size: int, seq_len: int, min_segment: int, max_segment: int,
                      fixed_offset: int | None = None) -> None:
    """One ConfigError naming the data.* key, before anything is drawn."""
    for key, value, minimum in (("vocab_size", vocab_size, 3), ("seq_len", seq_len, 4), ("min_segment", min_segment, 1)):
        check_int(f"data.{key}", value, minimum)
    if not isinstance(max_segment, int) or not min_segment <= max_segment or 2 * max_segment > seq_len - 1:
        raise ConfigError("data.max_segment", max_segment,
                          f"an integer in [min_segment={min_segment}, (seq_len - 1) // 2 = {(seq_len - 1) // 2}]")
    if fixed_offset is not None and (not isinstance(fixed_offset, int) or not max_segment <= fixed_offset <= seq_len - 1 - max_segment):
        raise ConfigError("data.fixed_offset", fixed_offset,
                          f"null or an integer in [max_segment={max_segment}, seq_len - 1 - max_segment = {seq_len - 1 - max_segment}]")


def repeat_token_batch(n: int, vocab_size: int, seq_len: int, min_segment: int, max_segment: int,
                       generator: torch.Generator, fixed_offset: int | None = None) -> Tensor:
    """`[n, seq_len]` int64 sequences, BOS first, each with one segment that recurs later."""
    check_repeat_keys(vocab_size, seq_len, min_segment, max_segment, fixed_offset)
    tokens = torch.randint(1, vocab_size, (n, seq_len), generator=generator)
    tokens[:, 0] = BOS_ID
    body = seq_len - 1  # positions 1..seq_len-1
    lengths = torch.randint(min_segment, max_segment + 1, (n,), generator=generator)
    for row, length in enumerate(lengths.tolist()):
        if fixed_offset is None:
            start = 1 + int(torch.randint(0, body - 2 * length + 1, (), generator=generator))
            copy = start + length + int(torch.randint(0, body - (start - 1) - 2 * length + 1, (), generator=generator))
        else:
            start = 1 + int(torch.randint(0, body - fixed_offset - length + 1, (), generator=generator))
            copy = start + fixed_offset
        tokens[row, copy:copy + length] = tokens[row, start:start + length]
    return tokens


def induction_probe(n: int, vocab_size: int, half_len: int, generator: torch.Generator, max_gap: int = 0) -> Tensor:
    """`[n, 1 + max_gap + 2 * half_len]`: BOS, g random filler tokens, a random block of `half_len`
    tokens, max_gap - g more filler, the same block again (g uniform in [0, max_gap] per sequence).

    max_gap=0 is Olsson's probe exactly. With max_gap > 0 the copy lies half_len..half_len+max_gap
    back, so a head that attends a fixed distance back (which a 1-layer model can learn) does not
    score as an induction head; the second block always ends the sequence, so the ICL positions
    (`headlab.measure.lm_probe.icl_positions`) are the same for every sequence.
    """
    if not isinstance(half_len, int) or half_len < 2:
        raise ConfigError("data.probe_half_len", half_len, "an integer >= 2")
    if not isinstance(max_gap, int) or max_gap < 0:
        raise ConfigError("data.probe_max_gap", max_gap, "an integer >= 0")
    block = torch.randint(1, vocab_size, (n, half_len), generator=generator)
    filler = torch.randint(1, vocab_size, (n, max_gap), generator=generator)
    gaps = torch.randint(0, max_gap + 1, (n,), generator=generator).tolist()
    rows = [torch.cat([filler[r, :g], block[r], filler[r, g:], block[r]]) for r, g in enumerate(gaps)]
    return torch.cat([torch.full((n, 1), BOS_ID), torch.stack(rows)], dim=1)


def text_induction_probe(ids: Tensor, n: int, half_len: int, generator: torch.Generator, max_gap: int = 0) -> Tensor:
    """`induction_probe`'s layout made of real text: each row's block is `half_len` consecutive tokens
    of `ids` (the 1-D token stream of texts the model never trained on) and its filler the `max_gap`
    tokens that follow them there, so the repeat is the only thing that is not ordinary text."""
    if not isinstance(half_len, int) or half_len < 2:
        raise ConfigError("data.probe_half_len", half_len, "an integer >= 2")
    need = half_len + max_gap
    if ids.dim() != 1 or ids.numel() <= need:
        raise DataError("the held-out texts", f"{ids.numel()} tokens: the probe needs more than probe_half_len + "
                                              f"probe_max_gap = {need} (more val text, or data.probe_source=random)")
    starts = torch.randint(0, ids.numel() - need, (n,), generator=generator).tolist()
    gaps = torch.randint(0, max_gap + 1, (n,), generator=generator).tolist()
    rows = []
    for s, g in zip(starts, gaps):
        block, filler = ids[s:s + half_len], ids[s + half_len:s + need]
        rows.append(torch.cat([filler[:g], block, filler[g:], block]))
    return torch.cat([torch.full((n, 1), BOS_ID), torch.stack(rows)], dim=1)
