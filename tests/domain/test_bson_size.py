"""The pure BSON size estimate agrees with the real encoder byte for byte."""

from __future__ import annotations

import uuid
from datetime import UTC
from typing import Any

import bson
from bson.binary import UuidRepresentation
from bson.codec_options import CodecOptions
from hypothesis import given
from hypothesis import strategies as st

from dogs_core.domain.definitions import bson_document_size

_OPTIONS: CodecOptions[Any] = CodecOptions(uuid_representation=UuidRepresentation.STANDARD)

keys = st.text(st.characters(blacklist_characters="\x00", blacklist_categories=["Cs"]), max_size=8)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=False),
    st.text(st.characters(blacklist_categories=["Cs"]), max_size=20),
    st.binary(max_size=20),
    st.datetimes(timezones=st.just(UTC)),
    st.uuids().map(lambda u: uuid.UUID(str(u))),
)
values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(keys, children, max_size=4),
    max_leaves=20,
)


@given(st.dictionaries(keys, values, max_size=6))
def test_bson_document_size_matches_the_encoder(document: dict[str, Any]) -> None:
    assert bson_document_size(document) == len(bson.encode(document, codec_options=_OPTIONS))
