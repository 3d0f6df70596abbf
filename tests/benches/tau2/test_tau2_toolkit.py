"""The typed-tool base: argument checking, error results instead of exceptions, descriptions."""
from __future__ import annotations

from typing import Literal, TypedDict

import pytest

from training.benches.tau2.toolkit import Toolkit, ToolError, parse_docstring, tool


class Item(TypedDict):
    name: str
    qty: int


class Shop(Toolkit):
    @tool("read")
    def look(self, name: str) -> dict:
        """Look an item up.

        Args:
            name: The item's name, such as 'pen'.
        """
        if name not in self.db["items"]:
            raise ToolError("Item not found")
        return self.db["items"][name]

    @tool("write")
    def add(self, items: list[Item], mode: Literal["a", "b"] = "a", price: float = 1.0) -> str:
        """Add items.

        Args:
            items: Items to add, each {"name", "qty"}.
            mode: 'a' or 'b'.
            price: Unit price.
        """
        for it in items:
            self.db["items"][it["name"]] = {"qty": it["qty"], "price": price, "mode": mode}
        return "added"

    def helper(self) -> str:        # not a tool
        return "hidden"


@pytest.fixture
def shop() -> Shop:
    return Shop({"items": {"pen": {"qty": 1, "price": 2.0, "mode": "a"}}})


def test_tools_are_marked_methods_only(shop):
    assert Shop.tool_names() == ["add", "look"]
    assert Shop.tool_kind("add") == "write" and Shop.tool_kind("look") == "read"
    assert shop.call("helper", {}).error


def test_good_call_returns_json_and_changes_db(shop):
    assert shop.call("look", {"name": "pen"}).content == '{"qty": 1, "price": 2.0, "mode": "a"}'
    before = shop.db_hash()
    result = shop.call("add", {"items": [{"name": "ink", "qty": 3}], "price": 2})
    assert not result.error and result.content == "added"
    assert shop.db["items"]["ink"] == {"qty": 3, "price": 2, "mode": "a"}
    assert shop.db_hash() != before


@pytest.mark.parametrize("name,args,fragment", [
    ("nope", {}, "unknown tool"),
    ("look", {}, "missing required argument 'name'"),
    ("look", {"name": 3}, "must be a string"),
    ("look", {"name": "pen", "extra": 1}, "unexpected argument"),
    ("look", ["pen"], "must be a JSON object"),
    ("look", {"name": "cup"}, "Item not found"),
    ("add", {"items": "pen"}, "must be a list"),
    ("add", {"items": [{"name": "x"}]}, "missing field(s) qty"),
    ("add", {"items": [{"name": "x", "qty": 1.5}]}, "must be an integer"),
    ("add", {"items": [{"name": "x", "qty": 1, "colour": "red"}]}, "unknown field(s) colour"),
    ("add", {"items": [], "mode": "c"}, "must be one of"),
    ("add", {"items": [], "price": True}, "must be a number"),
])
def test_bad_calls_come_back_as_error_results(shop, name, args, fragment):
    before = shop.db_hash()
    result = shop.call(name, args)
    assert result.error and result.content.startswith("Error: ")
    assert fragment in result.content
    assert shop.db_hash() == before        # a refused call changes nothing


def test_specs_carry_docstring_descriptions_and_schemas():
    spec = {s.name: s for s in Shop.specs()}["add"]
    assert spec.kind == "write" and spec.description == "Add items."
    props = spec.parameters["properties"]
    assert props["items"]["items"]["required"] == ["name", "qty"]
    assert props["mode"]["enum"] == ["a", "b"] and props["mode"]["description"] == "'a' or 'b'."
    assert spec.parameters["required"] == ["items"]


def test_parse_docstring_joins_continuation_lines():
    desc, args = parse_docstring("""Do it.
        More text.

        Args:
            x: First line
                and the second.
            y: Why.
        Returns:
            Nothing.
        """)
    assert desc == "Do it. More text."
    assert args == {"x": "First line and the second.", "y": "Why."}


def test_calculate_refuses_powers_that_would_hang_the_trainer():
    import pytest

    from training.benches.tau2.toolkit import ToolError, calculate_expression

    assert calculate_expression("(19.99 + 5) * 2") == "49.98"
    with pytest.raises(ToolError):
        calculate_expression("9**9**9**9")
