"""Every retail tool on a small fixture database, with the refusals tau2's retail tools make."""
from __future__ import annotations

import copy
import json

import pytest

from training.benches.tau2.retail.data_model import BadDatabase, check_db
from training.benches.tau2.retail.tools import RetailTools

ADDR = {"address1": "1 Main St", "address2": "", "city": "Austin", "country": "USA", "state": "TX",
        "zip": "78701"}
DB = {
    "products": {
        "100": {"name": "Mug", "product_id": "100", "variants": {
            "1001": {"item_id": "1001", "options": {"color": "red"}, "available": True, "price": 10.0},
            "1002": {"item_id": "1002", "options": {"color": "blue"}, "available": True, "price": 12.5},
            "1003": {"item_id": "1003", "options": {"color": "gold"}, "available": False, "price": 30.0}}},
        "200": {"name": "Lamp", "product_id": "200", "variants": {
            "2001": {"item_id": "2001", "options": {"size": "S"}, "available": True, "price": 40.0}}}},
    "users": {
        "ann_lee_1": {"user_id": "ann_lee_1", "name": {"first_name": "Ann", "last_name": "Lee"},
                      "address": ADDR, "email": "ann@example.com",
                      "payment_methods": {
                          "credit_card_1": {"source": "credit_card", "id": "credit_card_1",
                                            "brand": "visa", "last_four": "1234"},
                          "gift_card_1": {"source": "gift_card", "id": "gift_card_1", "balance": 2.0},
                          "paypal_1": {"source": "paypal", "id": "paypal_1"}},
                      "orders": ["#W1", "#W2", "#W3"]}},
    "orders": {
        "#W1": {"order_id": "#W1", "user_id": "ann_lee_1", "address": ADDR, "status": "pending",
                "items": [{"name": "Mug", "product_id": "100", "item_id": "1001", "price": 10.0,
                           "options": {"color": "red"}},
                          {"name": "Mug", "product_id": "100", "item_id": "1001", "price": 10.0,
                           "options": {"color": "red"}}],
                "fulfillments": [], "payment_history": [
                    {"transaction_type": "payment", "amount": 20.0, "payment_method_id": "gift_card_1"}]},
        "#W2": {"order_id": "#W2", "user_id": "ann_lee_1", "address": ADDR, "status": "delivered",
                "items": [{"name": "Mug", "product_id": "100", "item_id": "1001", "price": 10.0,
                           "options": {"color": "red"}},
                          {"name": "Lamp", "product_id": "200", "item_id": "2001", "price": 40.0,
                           "options": {"size": "S"}}],
                "fulfillments": [], "payment_history": [
                    {"transaction_type": "payment", "amount": 50.0, "payment_method_id": "credit_card_1"}]},
        "#W3": {"order_id": "#W3", "user_id": "ann_lee_1", "address": ADDR, "status": "processed",
                "items": [], "fulfillments": [], "payment_history": [
                    {"transaction_type": "payment", "amount": 0.0, "payment_method_id": "paypal_1"}]}},
}


@pytest.fixture
def tools() -> RetailTools:
    return RetailTools(copy.deepcopy(DB))


def ok(tools, name, **args):
    result = tools.call(name, args)
    assert not result.error, result.content
    return result.content


def err(tools, name, **args):
    before = tools.db_hash()
    result = tools.call(name, args)
    assert result.error, result.content
    assert tools.db_hash() == before
    return result.content


def test_every_tool_is_covered():
    covered = {"calculate", "cancel_pending_order", "exchange_delivered_order_items",
               "find_user_id_by_email", "find_user_id_by_name_zip", "get_order_details",
               "get_product_details", "get_user_details", "list_all_product_types",
               "modify_pending_order_address", "modify_pending_order_items",
               "modify_pending_order_payment", "modify_user_address",
               "return_delivered_order_items", "transfer_to_human_agents"}
    assert set(RetailTools.tool_names()) == covered


def test_lookups(tools):
    assert ok(tools, "find_user_id_by_email", email="ANN@example.com") == "ann_lee_1"
    assert ok(tools, "find_user_id_by_name_zip", first_name="ann", last_name="LEE", zip="78701") == "ann_lee_1"
    assert "User not found" in err(tools, "find_user_id_by_name_zip", first_name="Ann",
                                   last_name="Lee", zip="00000")
    assert "User not found" in err(tools, "find_user_id_by_email", email="bob@example.com")
    assert json.loads(ok(tools, "get_user_details", user_id="ann_lee_1"))["email"] == "ann@example.com"
    assert "User not found" in err(tools, "get_user_details", user_id="bob")
    assert json.loads(ok(tools, "get_order_details", order_id="#W2"))["status"] == "delivered"
    assert "Order not found" in err(tools, "get_order_details", order_id="W2")
    assert len(json.loads(ok(tools, "get_product_details", product_id="100"))["variants"]) == 3
    assert "Product not found" in err(tools, "get_product_details", product_id="1001")
    assert json.loads(ok(tools, "list_all_product_types")) == {"Lamp": "200", "Mug": "100"}
    assert ok(tools, "calculate", expression="(10 + 2.5) * 2") == "25.0"
    assert "Invalid" in err(tools, "calculate", expression="__import__('os')")
    assert "Invalid" in err(tools, "calculate", expression="1/0")
    assert ok(tools, "transfer_to_human_agents", summary="help") == "Transfer successful"
    assert "missing required argument 'summary'" in err(tools, "transfer_to_human_agents")


def test_cancel_refunds_gift_card_at_once(tools):
    assert "Invalid reason" in err(tools, "cancel_pending_order", order_id="#W1", reason="changed mind")
    assert "Non-pending" in err(tools, "cancel_pending_order", order_id="#W2", reason="no longer needed")
    order = json.loads(ok(tools, "cancel_pending_order", order_id="#W1", reason="no longer needed"))
    assert order["status"] == "cancelled" and order["cancel_reason"] == "no longer needed"
    assert order["payment_history"][-1] == {"transaction_type": "refund", "amount": 20.0,
                                            "payment_method_id": "gift_card_1"}
    assert tools.db["users"]["ann_lee_1"]["payment_methods"]["gift_card_1"]["balance"] == 22.0


def test_modify_pending_items_prices_each_item(tools):
    assert "different from the old" in err(tools, "modify_pending_order_items", order_id="#W1",
                                           item_ids=["1001"], new_item_ids=["1001"],
                                           payment_method_id="credit_card_1")
    assert "not found or available" in err(tools, "modify_pending_order_items", order_id="#W1",
                                           item_ids=["1001"], new_item_ids=["1003"],
                                           payment_method_id="credit_card_1")
    assert "should match" in err(tools, "modify_pending_order_items", order_id="#W1",
                                 item_ids=["1001"], new_item_ids=[], payment_method_id="credit_card_1")
    assert "not found" in err(tools, "modify_pending_order_items", order_id="#W1",
                              item_ids=["1001", "1001", "1001"], new_item_ids=["1002"] * 3,
                              payment_method_id="credit_card_1")
    assert "Insufficient gift card" in err(tools, "modify_pending_order_items", order_id="#W1",
                                           item_ids=["1001", "1001"], new_item_ids=["1002", "1002"],
                                           payment_method_id="gift_card_1")
    order = json.loads(ok(tools, "modify_pending_order_items", order_id="#W1", item_ids=["1001"],
                          new_item_ids=["1002"], payment_method_id="credit_card_1"))
    assert [i["item_id"] for i in order["items"]] == ["1002", "1001"]
    assert order["items"][0]["price"] == 12.5 and order["items"][0]["options"] == {"color": "blue"}
    assert order["status"] == "pending (item modified)"
    assert order["payment_history"][-1]["amount"] == 2.5
    assert "Non-pending" in err(tools, "modify_pending_order_items", order_id="#W1", item_ids=["1001"],
                                new_item_ids=["1002"], payment_method_id="credit_card_1")


def test_modify_pending_address_and_payment(tools):
    new = {"address1": "2 Oak Rd", "address2": "Apt 3", "city": "Boise", "state": "ID",
           "country": "USA", "zip": "83701"}
    assert json.loads(ok(tools, "modify_pending_order_address", order_id="#W1", **new))["address"]["city"] == "Boise"
    assert "Non-pending" in err(tools, "modify_pending_order_address", order_id="#W2", **new)
    assert "missing required argument 'zip'" in err(tools, "modify_pending_order_address", order_id="#W1",
                                                    **{k: v for k, v in new.items() if k != "zip"})
    assert "should be different" in err(tools, "modify_pending_order_payment", order_id="#W1",
                                        payment_method_id="gift_card_1")
    assert "Payment method not found" in err(tools, "modify_pending_order_payment", order_id="#W1",
                                             payment_method_id="credit_card_9")
    order = json.loads(ok(tools, "modify_pending_order_payment", order_id="#W1",
                          payment_method_id="credit_card_1"))
    assert [p["transaction_type"] for p in order["payment_history"]] == ["payment", "payment", "refund"]
    assert tools.db["users"]["ann_lee_1"]["payment_methods"]["gift_card_1"]["balance"] == 22.0
    assert "exactly one payment" in err(tools, "modify_pending_order_payment", order_id="#W1",
                                        payment_method_id="paypal_1")


def test_return_and_exchange_of_delivered_orders(tools):
    assert "original payment method" in err(tools, "return_delivered_order_items", order_id="#W2",
                                            item_ids=["1001"], payment_method_id="paypal_1")
    assert "Non-delivered" in err(tools, "return_delivered_order_items", order_id="#W1",
                                  item_ids=["1001"], payment_method_id="credit_card_1")
    assert "not found" in err(tools, "return_delivered_order_items", order_id="#W2",
                              item_ids=["1001", "1001"], payment_method_id="credit_card_1")
    assert "Insufficient gift card" in err(tools, "exchange_delivered_order_items", order_id="#W2",
                                           item_ids=["1001"], new_item_ids=["1002"],
                                           payment_method_id="gift_card_1")
    exchanged = copy.deepcopy(tools)
    order = json.loads(ok(exchanged, "exchange_delivered_order_items", order_id="#W2",
                          item_ids=["1001"], new_item_ids=["1002"], payment_method_id="credit_card_1"))
    assert order["status"] == "exchange requested" and order["exchange_price_difference"] == 2.5
    assert order["exchange_new_items"] == ["1002"]
    order = json.loads(ok(tools, "return_delivered_order_items", order_id="#W2",
                          item_ids=["2001", "1001"], payment_method_id="gift_card_1"))
    assert order["status"] == "return requested" and order["return_items"] == ["1001", "2001"]
    assert "Non-delivered" in err(tools, "exchange_delivered_order_items", order_id="#W2",
                                  item_ids=["1001"], new_item_ids=["1002"], payment_method_id="credit_card_1")


def test_modify_user_address(tools):
    user = json.loads(ok(tools, "modify_user_address", user_id="ann_lee_1", address1="9 Elm",
                         address2="", city="Tucson", state="AZ", country="USA", zip="85701"))
    assert user["address"]["zip"] == "85701"
    assert "User not found" in err(tools, "modify_user_address", user_id="zed", address1="9 Elm",
                                   address2="", city="Tucson", state="AZ", country="USA", zip="85701")


def test_check_db_refuses_a_malformed_database():
    assert check_db(copy.deepcopy(DB)) is not None
    with pytest.raises(BadDatabase, match="tables products, users, orders"):
        check_db({"products": {}})
    broken = copy.deepcopy(DB)
    del broken["orders"]["#W1"]["status"]
    with pytest.raises(BadDatabase, match="#W1 lacks status"):
        check_db(broken)
