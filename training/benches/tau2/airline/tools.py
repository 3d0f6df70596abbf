"""Airline tools: users, reservations and flights; book, cancel and change reservations.

Names, arguments and effects follow tau2-bench's airline toolkit (v0.2.0), so its tasks' gold
actions replay given its airline db.json. As there: the clock is 2024-05-15 15:00 EST; new
reservation ids are HATHAT, HATHAU, HATHAV; new certificates are certificate_3221322..24; booking
takes seats, cancelling and changing flights do not give them back.
"""
from __future__ import annotations

import copy

from training.benches.tau2.airline.data_model import (CabinClass, FlightInfo, FlightType, Insurance,
                                                      Passenger, Payment)
from training.benches.tau2.toolkit import calculate_expression, ToolError, Toolkit, tool

NOW = "2024-05-15T15:00:00"
NEW_RESERVATION_IDS = ("HATHAT", "HATHAU", "HATHAV")
NEW_CERTIFICATE_IDS = ("certificate_3221322", "certificate_3221323", "certificate_3221324")
AIRPORTS = (("SFO", "San Francisco"), ("JFK", "New York"), ("LAX", "Los Angeles"),
            ("ORD", "Chicago"), ("DFW", "Dallas"), ("DEN", "Denver"), ("SEA", "Seattle"),
            ("ATL", "Atlanta"), ("MIA", "Miami"), ("BOS", "Boston"), ("PHX", "Phoenix"),
            ("IAH", "Houston"), ("LAS", "Las Vegas"), ("MCO", "Orlando"), ("EWR", "Newark"),
            ("CLT", "Charlotte"), ("MSP", "Minneapolis"), ("DTW", "Detroit"),
            ("PHL", "Philadelphia"), ("LGA", "LaGuardia"))
BAG_FEE, INSURANCE_FEE = 50, 30


class AirlineTools(Toolkit):
    """Tools of the airline domain, acting on an airline database (see data_model.py)."""

    def _user(self, user_id: str) -> dict:
        if user_id not in self.db["users"]:
            raise ToolError(f"User {user_id} not found")
        return self.db["users"][user_id]

    def _reservation(self, reservation_id: str) -> dict:
        if reservation_id not in self.db["reservations"]:
            raise ToolError(f"Reservation {reservation_id} not found")
        return self.db["reservations"][reservation_id]

    def _flight(self, flight_number: str) -> dict:
        if flight_number not in self.db["flights"]:
            raise ToolError(f"Flight {flight_number} not found")
        return self.db["flights"][flight_number]

    def _flight_date(self, flight_number: str, date: str) -> dict:
        flight = self._flight(flight_number)
        if date not in flight["dates"]:
            raise ToolError(f"Flight {flight_number} not found on date {date}")
        return flight["dates"][date]

    def _available(self, flight_number: str, date: str, cabin: str, seats: int) -> dict:
        day = self._flight_date(flight_number, date)
        if day["status"] != "available":
            raise ToolError(f"Flight {flight_number} not available on date {date}")
        if day["available_seats"][cabin] < seats:
            raise ToolError(f"Not enough seats on flight {flight_number}")
        return day

    def _direct(self, date: str, origin: str | None, destination: str | None,
                leave_after: str | None = None) -> list[dict]:
        found = []
        for f in self.db["flights"].values():
            day = f["dates"].get(date)
            if (day is None or day["status"] != "available"
                    or (origin is not None and f["origin"] != origin)
                    or (destination is not None and f["destination"] != destination)
                    or (leave_after is not None and f["scheduled_departure_time_est"] < leave_after)):
                continue
            found.append({"flight_number": f["flight_number"], "origin": f["origin"],
                          "destination": f["destination"], "status": "available",
                          "scheduled_departure_time_est": f["scheduled_departure_time_est"],
                          "scheduled_arrival_time_est": f["scheduled_arrival_time_est"],
                          "date": None, "available_seats": dict(day["available_seats"]),
                          "prices": dict(day["prices"])})
        return found

    def _charge(self, user: dict, payment_id: str, total: int) -> dict | None:
        """Pay a change (flights, bags) with a card or gift card; certificates are refused."""
        if payment_id not in user["payment_methods"]:
            raise ToolError("Payment method not found")
        method = user["payment_methods"][payment_id]
        if method["source"] == "certificate":
            raise ToolError("Certificate cannot be used to update reservation")
        if method["source"] == "gift_card" and method["amount"] < total:
            raise ToolError("Gift card balance is not enough")
        if method["source"] == "gift_card":
            method["amount"] = round(method["amount"] - total, 2)
        return {"payment_id": payment_id, "amount": total} if total != 0 else None

    @tool("write")
    def book_reservation(self, user_id: str, origin: str, destination: str,
                         flight_type: FlightType, cabin: CabinClass, flights: list[FlightInfo],
                         passengers: list[Passenger], payment_methods: list[Payment],
                         total_baggages: int, nonfree_baggages: int,
                         insurance: Insurance) -> dict:
        """Book a new reservation for a user. Price: each flight's cabin price per passenger, plus
        $30 per passenger with insurance, plus $50 per non-free bag; the payments must add up to it.

        Args:
            user_id: The user's id, such as 'sara_doe_496'.
            origin: IATA code of the trip's origin, such as 'SFO'.
            destination: IATA code of the trip's destination, such as 'JFK'.
            flight_type: 'one_way' or 'round_trip'.
            cabin: 'basic_economy', 'economy' or 'business'.
            flights: Every flight segment, each {"flight_number": "HAT001", "date": "2024-05-20"}.
            passengers: Each passenger as {"first_name", "last_name", "dob" ('YYYY-MM-DD')}.
            payment_methods: Each payment as {"payment_id": "credit_card_7815826", "amount": 100}.
            total_baggages: The total number of bags.
            nonfree_baggages: The number of bags that are charged.
            insurance: 'yes' or 'no'.
        """
        user = self._user(user_id)
        reservation_id = next((r for r in NEW_RESERVATION_IDS if r not in self.db["reservations"]),
                              None)
        if reservation_id is None:
            raise ToolError("Too many reservations")
        segments, days, total = [], [], 0
        for info in flights:
            flight = self._flight(info["flight_number"])
            day = self._available(info["flight_number"], info["date"], cabin, len(passengers))
            price = day["prices"][cabin]
            segments.append({"flight_number": info["flight_number"], "origin": flight["origin"],
                             "destination": flight["destination"], "date": info["date"],
                             "price": price})
            days.append(day)
            total += price * len(passengers)
        total += INSURANCE_FEE * len(passengers) if insurance == "yes" else 0
        total += BAG_FEE * nonfree_baggages
        for pay in payment_methods:
            if pay["payment_id"] not in user["payment_methods"]:
                raise ToolError(f"Payment method {pay['payment_id']} not found")
            method = user["payment_methods"][pay["payment_id"]]
            if method["source"] in ("gift_card", "certificate") and method["amount"] < pay["amount"]:
                raise ToolError(f"Not enough balance in payment method {pay['payment_id']}")
        paid = sum(p["amount"] for p in payment_methods)
        if paid != total:
            raise ToolError(f"Payment amount does not add up, total price is {total}, "
                            f"but paid {paid}")
        for pay in payment_methods:
            method = user["payment_methods"][pay["payment_id"]]
            if method["source"] == "gift_card":
                method["amount"] = round(method["amount"] - pay["amount"], 2)
            elif method["source"] == "certificate":
                del user["payment_methods"][pay["payment_id"]]
        for day in days:
            day["available_seats"][cabin] -= len(passengers)
        reservation = {"reservation_id": reservation_id, "user_id": user_id, "origin": origin,
                       "destination": destination, "flight_type": flight_type, "cabin": cabin,
                       "flights": segments, "passengers": copy.deepcopy(passengers),
                       "payment_history": copy.deepcopy(payment_methods), "created_at": NOW,
                       "total_baggages": total_baggages, "nonfree_baggages": nonfree_baggages,
                       "insurance": insurance, "status": None}
        self.db["reservations"][reservation_id] = reservation
        user["reservations"].append(reservation_id)
        return reservation

    @tool("generic")
    def calculate(self, expression: str) -> str:
        """Evaluate an arithmetic expression and return the result rounded to 2 decimals.

        Args:
            expression: The expression, made of numbers, + - * /, parentheses and spaces, such as '2 * (150 + 30)'.
        """
        return calculate_expression(expression)

    @tool("write")
    def cancel_reservation(self, reservation_id: str) -> dict:
        """Cancel a whole reservation; every payment is refunded to its payment method.

        Args:
            reservation_id: The reservation id, such as 'ZFA04Y'.
        """
        reservation = self._reservation(reservation_id)
        refunds = [{"payment_id": p["payment_id"], "amount": -p["amount"]}
                   for p in reservation["payment_history"]]
        reservation["payment_history"].extend(refunds)
        reservation["status"] = "cancelled"
        return reservation

    @tool("read")
    def get_reservation_details(self, reservation_id: str) -> dict:
        """Return a reservation: flights, passengers, cabin, bags, insurance, payments, status.

        Args:
            reservation_id: The reservation id, such as '8JX2WO'.
        """
        return self._reservation(reservation_id)

    @tool("read")
    def get_user_details(self, user_id: str) -> dict:
        """Return a user's profile: name, address, membership, payment methods, saved passengers and
        reservation ids.

        Args:
            user_id: The user id, such as 'sara_doe_496'.
        """
        return self._user(user_id)

    @tool("read")
    def list_all_airports(self) -> list:
        """List every airport served, as {"iata", "city"} objects."""
        return [{"iata": code, "city": city} for code, city in AIRPORTS]

    @tool("read")
    def search_direct_flight(self, origin: str, destination: str, date: str) -> list:
        """Find direct flights with seats for sale between two airports on a date.

        Args:
            origin: IATA code of the origin, such as 'JFK'.
            destination: IATA code of the destination, such as 'LAX'.
            date: The date, 'YYYY-MM-DD', such as '2024-05-20'.
        """
        return self._direct(date, origin, destination)

    @tool("read")
    def search_onestop_flight(self, origin: str, destination: str, date: str) -> list:
        """Find one-stop connections (pairs of flights) between two airports, leaving on a date.

        Args:
            origin: IATA code of the origin, such as 'JFK'.
            destination: IATA code of the destination, such as 'LAX'.
            date: The date of the first flight, 'YYYY-MM-DD', such as '2024-05-20'.
        """
        pairs = []
        for first in self._direct(date, origin, None):
            first["date"] = date
            # an arrival marked '+1' lands the next day (the data's dates are all in May 2024)
            date2 = (f"2024-05-{int(date[-2:]) + 1}" if "+1" in first["scheduled_arrival_time_est"]
                     else date)
            for second in self._direct(date2, first["destination"], destination,
                                       leave_after=first["scheduled_arrival_time_est"]):
                second["date"] = date2
                pairs.append([first, second])
        return pairs

    @tool("write")
    def send_certificate(self, user_id: str, amount: int) -> str:
        """Give a user a travel certificate worth `amount` dollars (compensation). Be careful: only
        when the policy allows it.

        Args:
            user_id: The user id, such as 'sara_doe_496'.
            amount: The certificate's value in dollars.
        """
        user = self._user(user_id)
        for cert_id in NEW_CERTIFICATE_IDS:
            if cert_id not in user["payment_methods"]:
                user["payment_methods"][cert_id] = {"id": cert_id, "amount": amount,
                                                    "source": "certificate"}
                return f"Certificate {cert_id} added to user {user_id} with amount {amount}."
        raise ToolError("Too many certificates")

    @tool("generic")
    def transfer_to_human_agents(self, summary: str) -> str:
        """Hand the user over to a human agent with a summary of the issue. Only when the user asks
        for a human, or when the policy and the tools cannot solve the issue.

        Args:
            summary: A short summary of the user's issue.
        """
        return "Transfer successful"

    @tool("write")
    def update_reservation_baggages(self, reservation_id: str, total_baggages: int,
                                    nonfree_baggages: int, payment_id: str) -> dict:
        """Set a reservation's bags; each added non-free bag costs $50.

        Args:
            reservation_id: The reservation id, such as 'ZFA04Y'.
            total_baggages: The new total number of bags.
            nonfree_baggages: The new number of charged bags.
            payment_id: The user's payment method that pays, such as 'credit_card_7815826' or 'gift_card_7815826'.
        """
        reservation = self._reservation(reservation_id)
        user = self._user(reservation["user_id"])
        total = BAG_FEE * max(0, nonfree_baggages - reservation["nonfree_baggages"])
        payment = self._charge(user, payment_id, total)
        if payment is not None:
            reservation["payment_history"].append(payment)
        reservation["total_baggages"] = total_baggages
        reservation["nonfree_baggages"] = nonfree_baggages
        return reservation

    @tool("write")
    def update_reservation_flights(self, reservation_id: str, cabin: CabinClass,
                                   flights: list[FlightInfo], payment_id: str) -> dict:
        """Change a reservation's flights or cabin. List EVERY flight of the new itinerary, the
        unchanged ones too. The price difference is charged or refunded through payment_id.

        Args:
            reservation_id: The reservation id, such as 'ZFA04Y'.
            cabin: The cabin class for the whole reservation.
            flights: Every flight of the new itinerary, each {"flight_number": "HAT001", "date": "2024-05-20"}.
            payment_id: The user's payment method, such as 'credit_card_7815826' or 'gift_card_7815826'.
        """
        reservation = self._reservation(reservation_id)
        user = self._user(reservation["user_id"])
        n = len(reservation["passengers"])
        segments, total = [], 0
        for info in flights:
            kept = next((s for s in reservation["flights"]
                         if s["flight_number"] == info["flight_number"]
                         and s["date"] == info["date"] and cabin == reservation["cabin"]), None)
            if kept is not None:
                segments.append(kept)
                total += kept["price"] * n
                continue
            flight = self._flight(info["flight_number"])
            day = self._available(info["flight_number"], info["date"], cabin, n)
            segments.append({"flight_number": info["flight_number"], "date": info["date"],
                             "price": day["prices"][cabin], "origin": flight["origin"],
                             "destination": flight["destination"]})
            total += day["prices"][cabin] * n
        total -= sum(s["price"] for s in reservation["flights"]) * n
        payment = self._charge(user, payment_id, total)
        if payment is not None:
            reservation["payment_history"].append(payment)
        reservation["flights"] = segments
        reservation["cabin"] = cabin
        return reservation

    @tool("write")
    def update_reservation_passengers(self, reservation_id: str,
                                      passengers: list[Passenger]) -> dict:
        """Replace the passengers' details of a reservation (the number of passengers cannot change).

        Args:
            reservation_id: The reservation id, such as 'ZFA04Y'.
            passengers: Each passenger as {"first_name", "last_name", "dob" ('YYYY-MM-DD')}.
        """
        reservation = self._reservation(reservation_id)
        if len(passengers) != len(reservation["passengers"]):
            raise ToolError("Number of passengers does not match")
        reservation["passengers"] = copy.deepcopy(passengers)
        return reservation

    @tool("read")
    def get_flight_status(self, flight_number: str, date: str) -> str:
        """Return the status of a flight on a date ('available', 'on time', 'delayed', ...).

        Args:
            flight_number: The flight number, such as 'HAT001'.
            date: The date, 'YYYY-MM-DD'.
        """
        return self._flight_date(flight_number, date)["status"]
