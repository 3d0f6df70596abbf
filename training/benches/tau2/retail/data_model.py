"""The retail database: products with variants, users with payment methods, orders.

Records are plain JSON objects shaped as below (tau2-bench's retail `db.json` layout, so the real
file loads as it is); the TypedDicts document the shapes and give tool arguments their types.
`check_db` catches a malformed file with one clear sentence instead of a KeyError deep in a tool.
"""
from __future__ import annotations

from typing import Literal, TypedDict, get_args

OrderStatus = Literal["processed", "pending", "pending (item modified)", "delivered", "cancelled",
                      "exchange requested", "return requested"]
CancelReason = Literal["no longer needed", "ordered by mistake"]
CANCEL_REASONS = get_args(CancelReason)   # the same names as a tuple, for membership checks


class Variant(TypedDict):
    item_id: str
    options: dict           # option name -> value, e.g. {"color": "blue", "size": "L"}
    available: bool
    price: float


class Product(TypedDict):
    name: str
    product_id: str
    variants: dict          # item id -> Variant


class Address(TypedDict):
    address1: str
    address2: str
    city: str
    country: str
    state: str
    zip: str


class PaymentMethod(TypedDict, total=False):
    source: str             # "credit_card" | "paypal" | "gift_card"
    id: str
    brand: str              # credit cards
    last_four: str          # credit cards
    balance: float          # gift cards


class User(TypedDict):
    user_id: str
    name: dict              # {"first_name", "last_name"}
    address: Address
    email: str
    payment_methods: dict   # payment method id -> PaymentMethod
    orders: list


class OrderItem(TypedDict):
    name: str
    product_id: str
    item_id: str
    price: float
    options: dict


class Payment(TypedDict):
    transaction_type: str   # "payment" | "refund"
    amount: float
    payment_method_id: str


class Order(TypedDict, total=False):
    order_id: str
    user_id: str
    address: Address
    items: list             # OrderItem
    status: OrderStatus
    fulfillments: list      # {"tracking_id": [...], "item_ids": [...]}
    payment_history: list   # Payment
    cancel_reason: CancelReason
    exchange_items: list
    exchange_new_items: list
    exchange_payment_method_id: str
    exchange_price_difference: float
    return_items: list
    return_payment_method_id: str


TABLES = ("products", "users", "orders")
REQUIRED = {"products": ("name", "product_id", "variants"),
            "users": ("user_id", "name", "address", "email", "payment_methods", "orders"),
            "orders": ("order_id", "user_id", "address", "items", "status", "payment_history")}


class BadDatabase(ValueError):
    pass


def check_db(db: object, source: str = "retail database") -> dict:
    """Return `db` if it has the retail tables and each record its required fields; else raise."""
    if not isinstance(db, dict) or any(not isinstance(db.get(t), dict) for t in TABLES):
        raise BadDatabase(f"{source} must be a JSON object with the tables {', '.join(TABLES)}.")
    for table, fields in REQUIRED.items():
        for key, record in db[table].items():
            missing = [f for f in fields if f not in record]
            if missing:
                raise BadDatabase(f"{source}: {table} record {key} lacks {', '.join(missing)}.")
    return db
