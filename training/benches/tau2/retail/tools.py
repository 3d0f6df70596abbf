"""Retail tools: look up users, orders and products; cancel, modify, return and exchange orders.

Names, arguments and effects follow tau2-bench's retail toolkit (v0.2.0) so that its tasks' gold
actions replay here. One deliberate difference: `modify_pending_order_items` prices each swapped
item at its own new variant (tau2 v0.2.0 gives every swapped item the last variant's price and
options, a known slip); the payment difference is the same in both.
"""
from __future__ import annotations

import copy
import json

from training.benches.tau2.retail.data_model import CANCEL_REASONS
from training.benches.tau2.toolkit import calculate_expression, ToolError, Toolkit, tool


def money(x: float) -> float:
    return round(float(x), 2)


class RetailTools(Toolkit):
    """Tools of the retail domain, acting on a retail database (see data_model.py)."""

    # -- lookups used by the tools ---------------------------------------------------------------
    def _order(self, order_id: str) -> dict:
        if order_id not in self.db["orders"]:
            raise ToolError("Order not found")
        return self.db["orders"][order_id]

    def _user(self, user_id: str) -> dict:
        if user_id not in self.db["users"]:
            raise ToolError("User not found")
        return self.db["users"][user_id]

    def _product(self, product_id: str) -> dict:
        if product_id not in self.db["products"]:
            raise ToolError("Product not found")
        return self.db["products"][product_id]

    def _variant(self, product_id: str, item_id: str) -> dict:
        variants = self._product(product_id)["variants"]
        if item_id not in variants:
            raise ToolError(f"New item {item_id} not found or available")
        return variants[item_id]

    def _payment_method(self, user_id: str, payment_method_id: str) -> dict:
        methods = self._user(user_id)["payment_methods"]
        if payment_method_id not in methods:
            raise ToolError("Payment method not found")
        return methods[payment_method_id]

    def _check_items(self, order: dict, item_ids: list[str]) -> None:
        """Each id (duplicates allowed) must occur in the order at least as often as in the list."""
        present = [it["item_id"] for it in order["items"]]
        for item_id in item_ids:
            if item_ids.count(item_id) > present.count(item_id):
                raise ToolError(f"Item {item_id} not found in order {order['order_id']} "
                                f"(or listed more times than ordered)")

    def _swap_price_difference(self, order: dict, item_ids: list[str], new_item_ids: list[str],
                               *, allow_same: bool) -> tuple[float, list[dict]]:
        """Check a one-to-one swap of items for variants of the same products; return the price
        difference (new minus old) and the new variants, in order."""
        if len(item_ids) != len(new_item_ids):
            raise ToolError("The number of items to be exchanged should match")
        diff, variants = 0.0, []
        for old_id, new_id in zip(item_ids, new_item_ids):
            if old_id == new_id and not allow_same:
                raise ToolError("The new item id should be different from the old item id")
            item = next(it for it in order["items"] if it["item_id"] == old_id)
            variant = self._variant(item["product_id"], new_id)
            if not variant["available"]:
                raise ToolError(f"New item {new_id} not found or available")
            diff += variant["price"] - item["price"]
            variants.append(variant)
        return money(diff), variants

    # -- tools -----------------------------------------------------------------------------------
    @tool("generic")
    def calculate(self, expression: str) -> str:
        """Evaluate an arithmetic expression and return the result rounded to 2 decimals.

        Args:
            expression: The expression, made of numbers, + - * /, parentheses and spaces, such as '(19.99 + 5) * 2'.
        """
        return calculate_expression(expression)

    @tool("write")
    def cancel_pending_order(self, order_id: str, reason: str) -> dict:
        """Cancel an order whose status is 'pending'. Explain the details and get the user's explicit
        yes before calling. Every payment is refunded: to a gift card at once, otherwise within
        5-7 business days. Returns the order after cancellation.

        Args:
            order_id: The order id, such as '#W0000000' (note the leading '#').
            reason: Either 'no longer needed' or 'ordered by mistake'.
        """
        order = self._order(order_id)
        if order["status"] != "pending":
            raise ToolError("Non-pending order cannot be cancelled")
        if reason not in CANCEL_REASONS:
            raise ToolError("Invalid reason")
        refunds = []
        for payment in order["payment_history"]:
            pm_id = payment["payment_method_id"]
            refunds.append({"transaction_type": "refund", "amount": payment["amount"],
                            "payment_method_id": pm_id})
            method = self._payment_method(order["user_id"], pm_id)
            if method["source"] == "gift_card":
                method["balance"] = money(method["balance"] + payment["amount"])
        order["status"] = "cancelled"
        order["cancel_reason"] = reason
        order["payment_history"].extend(refunds)
        return order

    @tool("write")
    def exchange_delivered_order_items(self, order_id: str, item_ids: list[str],
                                       new_item_ids: list[str], payment_method_id: str) -> dict:
        """Exchange items of a 'delivered' order for other variants of the same products. A delivered
        order can be returned or exchanged only once, so collect every item first; explain the
        details and get the user's explicit yes before calling.

        Args:
            order_id: The order id, such as '#W0000000' (note the leading '#').
            item_ids: Item ids to exchange, such as ['1008292230']; repeat an id to exchange several of it.
            new_item_ids: The replacement item ids, position by position, each a variant of the same product.
            payment_method_id: Payment method that pays or receives the price difference, such as 'gift_card_0000000' or 'credit_card_0000000'.
        """
        order = self._order(order_id)
        if order["status"] != "delivered":
            raise ToolError("Non-delivered order cannot be exchanged")
        self._check_items(order, item_ids)
        diff, _ = self._swap_price_difference(order, item_ids, new_item_ids, allow_same=True)
        method = self._payment_method(order["user_id"], payment_method_id)
        if method["source"] == "gift_card" and method["balance"] < diff:
            raise ToolError("Insufficient gift card balance to pay for the price difference")
        order["status"] = "exchange requested"
        order["exchange_items"] = sorted(item_ids)
        order["exchange_new_items"] = sorted(new_item_ids)
        order["exchange_payment_method_id"] = payment_method_id
        order["exchange_price_difference"] = diff
        return order

    @tool("read")
    def find_user_id_by_name_zip(self, first_name: str, last_name: str, zip: str) -> str:
        """Find a user id from first name, last name and zip code. Try the email first; use this only
        when the user cannot give an email or it is not found.

        Args:
            first_name: The user's first name, such as 'John'.
            last_name: The user's last name, such as 'Doe'.
            zip: The zip code, such as '12345'.
        """
        for user_id, user in self.db["users"].items():
            name = user["name"]
            if (name["first_name"].lower() == first_name.lower()
                    and name["last_name"].lower() == last_name.lower()
                    and user["address"]["zip"] == zip):
                return user_id
        raise ToolError("User not found")

    @tool("read")
    def find_user_id_by_email(self, email: str) -> str:
        """Find a user id from an email address.

        Args:
            email: The email, such as 'something@example.com'.
        """
        for user_id, user in self.db["users"].items():
            if user["email"].lower() == email.lower():
                return user_id
        raise ToolError("User not found")

    @tool("read")
    def get_order_details(self, order_id: str) -> dict:
        """Return the status, items, address, fulfillments and payments of an order.

        Args:
            order_id: The order id, such as '#W0000000' (note the leading '#').
        """
        return self._order(order_id)

    @tool("read")
    def get_product_details(self, product_id: str) -> dict:
        """Return a product type and all its variants (item ids, options, availability, price).

        Args:
            product_id: The product id, such as '6086499569' (a product id, not an item id).
        """
        return self._product(product_id)

    @tool("read")
    def get_user_details(self, user_id: str) -> dict:
        """Return a user's name, address, email, payment methods and order ids.

        Args:
            user_id: The user id, such as 'sara_doe_496'.
        """
        return self._user(user_id)

    @tool("read")
    def list_all_product_types(self) -> str:
        """List every product type's name and product id, as a JSON object sorted by name."""
        return json.dumps({p["name"]: p["product_id"] for p in self.db["products"].values()},
                          sort_keys=True)

    @tool("write")
    def modify_pending_order_address(self, order_id: str, address1: str, address2: str, city: str,
                                     state: str, country: str, zip: str) -> dict:
        """Change the shipping address of a pending order. Explain the change and get the user's
        explicit yes before calling.

        Args:
            order_id: The order id, such as '#W0000000' (note the leading '#').
            address1: First address line, such as '123 Main St'.
            address2: Second address line, such as 'Apt 1', or ''.
            city: The city, such as 'San Francisco'.
            state: The state, such as 'CA'.
            country: The country, such as 'USA'.
            zip: The zip code, such as '12345'.
        """
        order = self._order(order_id)
        if "pending" not in order["status"]:
            raise ToolError("Non-pending order cannot be modified")
        order["address"] = {"address1": address1, "address2": address2, "city": city,
                            "country": country, "state": state, "zip": zip}
        return order

    @tool("write")
    def modify_pending_order_items(self, order_id: str, item_ids: list[str],
                                   new_item_ids: list[str], payment_method_id: str) -> dict:
        """Swap items of a 'pending' order for other variants of the same products. This can be done
        only once per order, so collect every change first; explain the details and get the user's
        explicit yes before calling.

        Args:
            order_id: The order id, such as '#W0000000' (note the leading '#').
            item_ids: Item ids to change, such as ['1008292230']; repeat an id to change several of it.
            new_item_ids: The new item ids, position by position, each a different variant of the same product.
            payment_method_id: Payment method that pays or receives the price difference, such as 'gift_card_0000000' or 'credit_card_0000000'.
        """
        order = self._order(order_id)
        if order["status"] != "pending":
            raise ToolError("Non-pending order cannot be modified")
        self._check_items(order, item_ids)
        diff, variants = self._swap_price_difference(order, item_ids, new_item_ids,
                                                     allow_same=False)
        method = self._payment_method(order["user_id"], payment_method_id)
        if method["source"] == "gift_card" and method["balance"] < diff:
            raise ToolError("Insufficient gift card balance to pay for the new item")
        order["payment_history"].append({"transaction_type": "payment" if diff > 0 else "refund",
                                         "amount": abs(diff),
                                         "payment_method_id": payment_method_id})
        if method["source"] == "gift_card":
            method["balance"] = money(method["balance"] - diff)
        for old_id, variant in zip(item_ids, variants):
            # the first item still carrying the old id (duplicates change one at a time)
            item = next(it for it in order["items"] if it["item_id"] == old_id)
            item["item_id"] = variant["item_id"]
            item["price"] = variant["price"]
            item["options"] = copy.deepcopy(variant["options"])
        order["status"] = "pending (item modified)"
        return order

    @tool("write")
    def modify_pending_order_payment(self, order_id: str, payment_method_id: str) -> dict:
        """Pay a pending order with another of the user's payment methods; the original payment is
        refunded. Explain the change and get the user's explicit yes before calling.

        Args:
            order_id: The order id, such as '#W0000000' (note the leading '#').
            payment_method_id: The new payment method, such as 'gift_card_0000000' or 'credit_card_0000000'.
        """
        order = self._order(order_id)
        if "pending" not in order["status"]:
            raise ToolError("Non-pending order cannot be modified")
        method = self._payment_method(order["user_id"], payment_method_id)
        history = order["payment_history"]
        if len(history) != 1 or history[0]["transaction_type"] != "payment":
            raise ToolError("There should be exactly one payment for a pending order")
        old_id = history[0]["payment_method_id"]
        if old_id == payment_method_id:
            raise ToolError("The new payment method should be different from the current one")
        amount = history[0]["amount"]
        if method["source"] == "gift_card" and method["balance"] < amount:
            raise ToolError("Insufficient gift card balance to pay for the order")
        history.append({"transaction_type": "payment", "amount": amount,
                        "payment_method_id": payment_method_id})
        history.append({"transaction_type": "refund", "amount": amount,
                        "payment_method_id": old_id})
        if method["source"] == "gift_card":
            method["balance"] = money(method["balance"] - amount)
        old_method = self._payment_method(order["user_id"], old_id)
        if old_method["source"] == "gift_card":
            old_method["balance"] = money(old_method["balance"] + amount)
        return order

    @tool("write")
    def modify_user_address(self, user_id: str, address1: str, address2: str, city: str,
                            state: str, country: str, zip: str) -> dict:
        """Change a user's default address. Explain the change and get the user's explicit yes
        before calling.

        Args:
            user_id: The user id, such as 'sara_doe_496'.
            address1: First address line, such as '123 Main St'.
            address2: Second address line, such as 'Apt 1', or ''.
            city: The city, such as 'San Francisco'.
            state: The state, such as 'CA'.
            country: The country, such as 'USA'.
            zip: The zip code, such as '12345'.
        """
        user = self._user(user_id)
        user["address"] = {"address1": address1, "address2": address2, "city": city,
                           "country": country, "state": state, "zip": zip}
        return user

    @tool("write")
    def return_delivered_order_items(self, order_id: str, item_ids: list[str],
                                     payment_method_id: str) -> dict:
        """Request the return of items of a 'delivered' order; the user gets an email saying how to
        send them back. The refund goes to the original payment method or a gift card. Explain the
        details and get the user's explicit yes before calling.

        Args:
            order_id: The order id, such as '#W0000000' (note the leading '#').
            item_ids: Item ids to return, such as ['1008292230']; repeat an id to return several of it.
            payment_method_id: Where the refund goes: the original payment method or a gift card, such as 'gift_card_0000000'.
        """
        order = self._order(order_id)
        if order["status"] != "delivered":
            raise ToolError("Non-delivered order cannot be returned")
        method = self._payment_method(order["user_id"], payment_method_id)
        if (method["source"] != "gift_card"
                and payment_method_id != order["payment_history"][0]["payment_method_id"]):
            raise ToolError("Payment method should be the original payment method")
        self._check_items(order, item_ids)
        order["status"] = "return requested"
        order["return_items"] = sorted(item_ids)
        order["return_payment_method_id"] = payment_method_id
        return order

    @tool("generic")
    def transfer_to_human_agents(self, summary: str) -> str:
        """Hand the user over to a human agent with a summary of the issue. Only when the user asks
        for a human, or when the policy and the tools cannot solve the issue.

        Args:
            summary: A short summary of the user's issue.
        """
        return "Transfer successful"
