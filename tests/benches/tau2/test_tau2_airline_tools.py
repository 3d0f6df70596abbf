"""Every airline tool on a small fixture database, with tau2's airline rules and refusals."""
from __future__ import annotations

import copy
import json

import pytest

from training.benches.tau2.airline.data_model import BadDatabase, check_db
from training.benches.tau2.airline.tools import AirlineTools


def day(be=5, ec=5, bu=2, prices=(50, 100, 300)):
    return {"status": "available", "available_seats": {"basic_economy": be, "economy": ec, "business": bu},
            "prices": dict(zip(("basic_economy", "economy", "business"), prices))}


ME = {"first_name": "Ann", "last_name": "Lee", "dob": "1990-01-01"}
DB = {
    "flights": {
        "HAT001": {"flight_number": "HAT001", "origin": "JFK", "destination": "SFO",
                   "scheduled_departure_time_est": "08:00:00", "scheduled_arrival_time_est": "11:00:00",
                   "dates": {"2024-05-20": day(), "2024-05-21": day(ec=0), "2024-05-15": {"status": "delayed"}}},
        "HAT002": {"flight_number": "HAT002", "origin": "SFO", "destination": "SEA",
                   "scheduled_departure_time_est": "12:00:00", "scheduled_arrival_time_est": "14:00:00",
                   "dates": {"2024-05-20": day(prices=(40, 80, 200))}},
        "HAT003": {"flight_number": "HAT003", "origin": "JFK", "destination": "SFO",
                   "scheduled_departure_time_est": "18:00:00", "scheduled_arrival_time_est": "21:00:00",
                   "dates": {"2024-05-20": {"status": "cancelled"}, "2024-05-22": day(prices=(60, 120, 330))}}},
    "users": {"ann_lee_1": {
        "user_id": "ann_lee_1", "name": {"first_name": "Ann", "last_name": "Lee"}, "address": {},
        "email": "ann@example.com", "dob": "1990-01-01", "membership": "gold", "saved_passengers": [],
        "payment_methods": {
            "credit_card_1": {"source": "credit_card", "id": "credit_card_1", "brand": "visa", "last_four": "1"},
            "gift_card_1": {"source": "gift_card", "id": "gift_card_1", "amount": 100.0},
            "certificate_1": {"source": "certificate", "id": "certificate_1", "amount": 50.0}},
        "reservations": ["ABC123"]}},
    "reservations": {"ABC123": {
        "reservation_id": "ABC123", "user_id": "ann_lee_1", "origin": "JFK", "destination": "SFO",
        "flight_type": "one_way", "cabin": "economy",
        "flights": [{"flight_number": "HAT001", "origin": "JFK", "destination": "SFO",
                     "date": "2024-05-20", "price": 100}],
        "passengers": [ME], "payment_history": [{"payment_id": "credit_card_1", "amount": 100}],
        "created_at": "2024-05-01T10:00:00", "total_baggages": 0, "nonfree_baggages": 0,
        "insurance": "no", "status": None}},
}


@pytest.fixture
def tools() -> AirlineTools:
    return AirlineTools(copy.deepcopy(DB))


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
    assert set(AirlineTools.tool_names()) == {
        "book_reservation", "calculate", "cancel_reservation", "get_flight_status",
        "get_reservation_details", "get_user_details", "list_all_airports", "search_direct_flight",
        "search_onestop_flight", "send_certificate", "transfer_to_human_agents",
        "update_reservation_baggages", "update_reservation_flights", "update_reservation_passengers"}


def test_reads_and_searches(tools):
    assert json.loads(ok(tools, "get_user_details", user_id="ann_lee_1"))["membership"] == "gold"
    assert "User zed not found" in err(tools, "get_user_details", user_id="zed")
    assert json.loads(ok(tools, "get_reservation_details", reservation_id="ABC123"))["cabin"] == "economy"
    assert "not found" in err(tools, "get_reservation_details", reservation_id="NOPE")
    assert ok(tools, "get_flight_status", flight_number="HAT001", date="2024-05-15") == "delayed"
    assert "not found on date" in err(tools, "get_flight_status", flight_number="HAT001", date="2024-06-01")
    assert {"iata": "JFK", "city": "New York"} in json.loads(ok(tools, "list_all_airports"))
    direct = json.loads(ok(tools, "search_direct_flight", origin="JFK", destination="SFO", date="2024-05-20"))
    assert [f["flight_number"] for f in direct] == ["HAT001"]          # HAT003 is cancelled that day
    pairs = json.loads(ok(tools, "search_onestop_flight", origin="JFK", destination="SEA", date="2024-05-20"))
    assert [[p[0]["flight_number"], p[1]["flight_number"]] for p in pairs] == [["HAT001", "HAT002"]]
    assert ok(tools, "calculate", expression="2 * (100 + 30)") == "260.0"
    assert ok(tools, "transfer_to_human_agents", summary="x") == "Transfer successful"


def test_book_reservation_prices_pays_and_takes_seats(tools):
    args = dict(user_id="ann_lee_1", origin="JFK", destination="SEA", flight_type="one_way",
                cabin="economy", flights=[{"flight_number": "HAT001", "date": "2024-05-20"},
                                          {"flight_number": "HAT002", "date": "2024-05-20"}],
                passengers=[ME], total_baggages=1, nonfree_baggages=1, insurance="yes")
    # 100 + 80 + 30 insurance + 50 bag = 260
    assert "does not add up, total price is 260" in err(
        tools, "book_reservation", payment_methods=[{"payment_id": "credit_card_1", "amount": 200}], **args)
    assert "Not enough balance" in err(
        tools, "book_reservation", payment_methods=[{"payment_id": "gift_card_1", "amount": 260}], **args)
    assert "must be one of" in err(tools, "book_reservation", **{**args, "cabin": "first"},
                                   payment_methods=[{"payment_id": "credit_card_1", "amount": 260}])
    assert "missing field(s) dob" in err(tools, "book_reservation", **{**args, "passengers": [{"first_name": "A", "last_name": "B"}]},
                                         payment_methods=[{"payment_id": "credit_card_1", "amount": 260}])
    res = json.loads(ok(tools, "book_reservation", payment_methods=[
        {"payment_id": "certificate_1", "amount": 50}, {"payment_id": "gift_card_1", "amount": 100},
        {"payment_id": "credit_card_1", "amount": 110}], **args))
    assert res["reservation_id"] == "HATHAT" and res["created_at"] == "2024-05-15T15:00:00"
    methods = tools.db["users"]["ann_lee_1"]["payment_methods"]
    assert "certificate_1" not in methods and methods["gift_card_1"]["amount"] == 0.0
    assert tools.db["flights"]["HAT002"]["dates"]["2024-05-20"]["available_seats"]["economy"] == 4
    assert tools.db["users"]["ann_lee_1"]["reservations"] == ["ABC123", "HATHAT"]
    assert "Not enough seats" in err(tools, "book_reservation", **{**args, "flights": [
        {"flight_number": "HAT001", "date": "2024-05-21"}]},
        payment_methods=[{"payment_id": "credit_card_1", "amount": 180}])


def test_cancel_refunds_every_payment(tools):
    res = json.loads(ok(tools, "cancel_reservation", reservation_id="ABC123"))
    assert res["status"] == "cancelled"
    assert res["payment_history"][-1] == {"payment_id": "credit_card_1", "amount": -100}
    assert "not found" in err(tools, "cancel_reservation", reservation_id="ZZZ999")


def test_update_flights_charges_the_difference(tools):
    assert "Certificate cannot be used" in err(
        tools, "update_reservation_flights", reservation_id="ABC123", cabin="economy",
        flights=[{"flight_number": "HAT003", "date": "2024-05-22"}], payment_id="certificate_1")
    assert "not available" in err(
        tools, "update_reservation_flights", reservation_id="ABC123", cabin="economy",
        flights=[{"flight_number": "HAT003", "date": "2024-05-20"}], payment_id="credit_card_1")
    res = json.loads(ok(tools, "update_reservation_flights", reservation_id="ABC123", cabin="business",
                        flights=[{"flight_number": "HAT001", "date": "2024-05-20"}], payment_id="credit_card_1"))
    assert res["cabin"] == "business" and res["flights"][0]["price"] == 300
    assert res["payment_history"][-1] == {"payment_id": "credit_card_1", "amount": 200}
    # moving to a cheaper flight refunds the difference through the gift card
    res = json.loads(ok(tools, "update_reservation_flights", reservation_id="ABC123", cabin="economy",
                        flights=[{"flight_number": "HAT003", "date": "2024-05-22"}], payment_id="gift_card_1"))
    assert res["payment_history"][-1] == {"payment_id": "gift_card_1", "amount": -180}
    assert tools.db["users"]["ann_lee_1"]["payment_methods"]["gift_card_1"]["amount"] == 280.0


def test_update_flights_refuses_short_gift_card(tools):
    assert "Gift card balance is not enough" in err(
        tools, "update_reservation_flights", reservation_id="ABC123", cabin="business",
        flights=[{"flight_number": "HAT003", "date": "2024-05-22"}], payment_id="gift_card_1")


def test_bags_passengers_and_certificates(tools):
    res = json.loads(ok(tools, "update_reservation_baggages", reservation_id="ABC123", total_baggages=2,
                        nonfree_baggages=1, payment_id="credit_card_1"))
    assert res["total_baggages"] == 2 and res["payment_history"][-1] == {"payment_id": "credit_card_1", "amount": 50}
    assert "Payment method not found" in err(tools, "update_reservation_baggages", reservation_id="ABC123",
                                             total_baggages=3, nonfree_baggages=2, payment_id="paypal_1")
    assert "does not match" in err(tools, "update_reservation_passengers", reservation_id="ABC123",
                                   passengers=[ME, ME])
    res = json.loads(ok(tools, "update_reservation_passengers", reservation_id="ABC123",
                        passengers=[{**ME, "dob": "1990-02-02"}]))
    assert res["passengers"][0]["dob"] == "1990-02-02"
    assert "certificate_3221322" in ok(tools, "send_certificate", user_id="ann_lee_1", amount=100)
    assert "must be an integer" in err(tools, "send_certificate", user_id="ann_lee_1", amount="lots")


def test_check_db_refuses_a_malformed_database():
    assert check_db(copy.deepcopy(DB)) is not None
    with pytest.raises(BadDatabase, match="flights, users, reservations"):
        check_db([])
