"""The airline database: flights with per-date status, seats and prices; users; reservations.

Records are plain JSON objects in tau2-bench's airline `db.json` layout (so the real file, when a
user has it, loads as it is); the TypedDicts document the shapes and type the tools' arguments.
"""
from __future__ import annotations

from typing import Literal, NotRequired, TypedDict, get_args

FlightType = Literal["round_trip", "one_way"]
CabinClass = Literal["business", "economy", "basic_economy"]
Insurance = Literal["yes", "no"]
CABINS = get_args(CabinClass)      # the same names as a tuple, for membership checks


class FlightInfo(TypedDict):
    flight_number: str      # such as 'HAT001'
    date: str               # 'YYYY-MM-DD'


class Passenger(TypedDict):
    first_name: str
    last_name: str
    dob: str                # 'YYYY-MM-DD'


class Payment(TypedDict):
    payment_id: str         # a payment method id of the user, such as 'credit_card_7815826'
    amount: int             # dollars; negative for a refund


class PaymentMethod(TypedDict):
    source: str             # "credit_card" | "gift_card" | "certificate"
    id: str
    brand: NotRequired[str]
    last_four: NotRequired[str]
    amount: NotRequired[float]   # gift card / certificate balance


class FlightDate(TypedDict):
    status: str             # "available" | "on time" | "flying" | "landed" | "cancelled" | "delayed"
    available_seats: NotRequired[dict]   # cabin -> seats (status "available")
    prices: NotRequired[dict]            # cabin -> dollars (status "available")


class Flight(TypedDict):
    flight_number: str
    origin: str
    destination: str
    scheduled_departure_time_est: str   # 'HH:MM:SS'
    scheduled_arrival_time_est: str     # 'HH:MM:SS', '+1' suffix when next day
    dates: dict             # date -> FlightDate


class ReservationFlight(TypedDict):
    flight_number: str
    origin: str
    destination: str
    date: str
    price: int


class User(TypedDict):
    user_id: str
    name: dict
    address: dict
    email: str
    dob: str
    payment_methods: dict   # id -> PaymentMethod
    saved_passengers: list
    membership: str         # "gold" | "silver" | "regular"
    reservations: list


class Reservation(TypedDict):
    reservation_id: str
    user_id: str
    origin: str
    destination: str
    flight_type: FlightType
    cabin: CabinClass
    flights: list           # ReservationFlight
    passengers: list        # Passenger
    payment_history: list   # Payment
    created_at: str
    total_baggages: int
    nonfree_baggages: int
    insurance: Insurance
    status: NotRequired[str | None]     # "cancelled" or absent/None


TABLES = ("flights", "users", "reservations")
REQUIRED = {"flights": ("flight_number", "origin", "destination", "dates"),
            "users": ("user_id", "name", "payment_methods", "membership", "reservations"),
            "reservations": ("reservation_id", "user_id", "flights", "passengers",
                             "payment_history", "cabin")}


class BadDatabase(ValueError):
    pass


def check_db(db: object, source: str = "airline database") -> dict:
    """Return `db` if it has the airline tables and each record its required fields; else raise."""
    if not isinstance(db, dict) or any(not isinstance(db.get(t), dict) for t in TABLES):
        raise BadDatabase(f"{source} must be a JSON object with the tables {', '.join(TABLES)}.")
    for table, fields in REQUIRED.items():
        for key, record in db[table].items():
            missing = [f for f in fields if f not in record]
            if missing:
                raise BadDatabase(f"{source}: {table} record {key} lacks {', '.join(missing)}.")
    return db
