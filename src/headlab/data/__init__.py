"""Data: character tokenizer, sources (synthetic, zh_reviews, files), split, datamodule, probe set."""

from headlab.data.collate import collate_batch, pad_right
from headlab.data.datamodule import (
    EncodedSplit,
    FilesDataModule,
    MultidomainDataModule,
    SyntheticDataModule,
    TextDataModule,
    ZhReviewsDataModule,
)
from headlab.data.files import load_file_splits, load_files
from headlab.data.labeled import LabeledTexts
from headlab.data.probe import ProbeSet, select_probe
from headlab.data.sampler import BucketBatchSampler
from headlab.data.split import SplitIndices, check_fractions, stratified_split
from headlab.data.synthetic import FEATURES, generate_synthetic
from headlab.data.tokenizer import (
    CLS_ID,
    PAD_ID,
    SPECIAL_TOKENS,
    UNK_ID,
    CharTokenizer,
    is_punctuation,
)
from headlab.data.zh_reviews import load_zh_reviews

__all__ = [
    "CLS_ID",
    "FEATURES",
    "PAD_ID",
    "SPECIAL_TOKENS",
    "UNK_ID",
    "BucketBatchSampler",
    "CharTokenizer",
    "EncodedSplit",
    "LabeledTexts",
    "ProbeSet",
    "SplitIndices",
    "FilesDataModule",
    "MultidomainDataModule",
    "SyntheticDataModule",
    "TextDataModule",
    "ZhReviewsDataModule",
    "check_fractions",
    "collate_batch",
    "generate_synthetic",
    "is_punctuation",
    "load_file_splits",
    "load_files",
    "load_zh_reviews",
    "pad_right",
    "select_probe",
    "stratified_split",
]
