"""data=multidomain: each domain's rule, seeding, and domain ids through the datamodule's batches."""

from __future__ import annotations

import pytest

from headlab.data import TextDataModule
from headlab.data.multidomain import generate_multidomain
from headlab.errors import ConfigError

S_HALF = set("cdefghijklm")  # the synthetic task's S letters with its defaults (marker y, end letters ab)


def _rule(domain: str, text: str) -> int:
    """Each domain's label recomputed from the text alone (tag letter at 0, punctuation last)."""
    body = text[1:-1]
    if domain == "previous":
        before = {body[i - 1] for i, ch in enumerate(body) if ch == "y"}
        assert before <= S_HALF or not before & S_HALF
        return int(before <= S_HALF)
    return int(body[0] == body[-1])


def test_each_domain_is_labelled_by_its_own_rule():
    data = generate_multidomain(n=200, seed=3)
    assert data.domains.count("previous") == data.domains.count("first_last") == 200
    for text, label, domain in zip(data.texts, data.labels, data.domains):
        assert text[0] == {"previous": "P", "first_last": "F"}[domain]
        assert label == _rule(domain, text)
    # the rules really differ: in each domain the other domain's rule is a coin flip
    for domain, other in (("previous", "first_last"), ("first_last", "previous")):
        rows = [(t, y) for t, y, d in zip(data.texts, data.labels, data.domains) if d == domain]
        agree = sum(_rule(other, t) == y for t, y in rows) / len(rows)
        assert 0.35 < agree < 0.65


def test_seeded_and_domains_independent():
    a, b = generate_multidomain(n=50, seed=1), generate_multidomain(n=50, seed=1)
    assert a.texts == b.texts and a.labels == b.labels
    assert generate_multidomain(n=50, seed=2).texts != a.texts
    three = generate_multidomain(n=50, seed=1, domains=["previous", "first_last", "exclaim"])
    assert three.texts[:100] == a.texts  # adding a domain leaves the others' texts unchanged
    assert generate_multidomain(n=5, mark_domain=False).texts[0][0].islower()


@pytest.mark.parametrize("kwargs, key", [(dict(domains=["previous"]), "data.multidomain.domains"),
                                         (dict(domains=["previous", "nope"]), "data.multidomain.domains"),
                                         (dict(n=0), "data.multidomain.n")])
def test_bad_arguments_name_the_key(kwargs, key):
    with pytest.raises(ConfigError, match=key):
        generate_multidomain(**kwargs)


def test_batches_carry_each_examples_domain_id():
    dm = TextDataModule("multidomain", max_len=40, batch_size=16, probe_size=8, multidomain={"n": 100})
    assert dm.domain_names == ["first_last", "previous"] and dm.n_domains == 2
    tag_of = {"P": dm.domain_names.index("previous"), "F": dm.domain_names.index("first_last")}
    for loader in (dm.train_dataloader(), dm.val_dataloader()):
        batch = next(iter(loader))
        tags = [dm.tokenizer.decode(ids[1:2].tolist()) for ids in batch["input_ids"]]
        assert batch["domain_ids"].tolist() == [tag_of[t] for t in tags]
    assert dm.stats["unknown_domain_val"] == 0
    assert "domain_ids" not in next(iter(TextDataModule("synthetic", max_len=40, probe_size=8,
                                                        synthetic={"n": 100}).val_dataloader()))


def test_a_val_domain_absent_from_train_gets_minus_one(write_file):
    rows = "".join(f"text{i} abc,{i % 2},{'books' if i % 2 else 'dvd'}\n" for i in range(20))
    train = write_file("train.csv", "text,label,domain\n" + rows)
    val = write_file("val.csv", "text,label,domain\nzz one,0,music\nzz two,1,books\n")
    dm = TextDataModule("files", max_len=40, probe_size=2, files={"train": str(train), "val": str(val)})
    assert dm.domain_names == ["books", "dvd"]
    assert next(iter(dm.val_dataloader()))["domain_ids"].tolist() == [-1, 0]
    assert dm.stats["unknown_domain_val"] == 1
