"""Telecom agent tools: find customers, lines, bills; suspend/resume lines, roaming, data refuel,
payment requests. Also the set-up functions and assertions tau2 tasks call on the carrier's side
(not tools: `set_data_usage`, `suspend_line_for_overdue_bill`, `assert_*`).

Names, arguments and effects follow tau2-bench's telecom toolkit (v0.2.0). One difference: a
draft bill created for a one-time charge gets a deterministic id (`B<customer>-draft-<n>`, tau2
draws a random one), so that the DB check of two replays can agree.
"""
from __future__ import annotations

import datetime

from training.benches.tau2.telecom.data_model import TODAY
from training.benches.tau2.toolkit import ToolError, Toolkit, tool


def _date(s: str) -> datetime.date:
    return datetime.date.fromisoformat(s[:10])


class TelecomTools(Toolkit):
    """The carrier's tools, acting on the telecom database (see data_model.py)."""

    def _find(self, table: str, key: str, value: str, what: str) -> dict:
        for record in self.db[table]:
            if record[key] == value:
                return record
        raise ToolError(f"{what} with ID {value} not found")

    def _line(self, line_id: str) -> dict:
        return self._find("lines", "line_id", line_id, "Line")

    def _plan(self, plan_id: str) -> dict:
        return self._find("plans", "plan_id", plan_id, "Plan")

    def _bill(self, bill_id: str) -> dict:
        return self._find("bills", "bill_id", bill_id, "Bill")

    def _line_by_phone(self, phone_number: str) -> dict:
        for line in self.db["lines"]:
            if line["phone_number"] == phone_number:
                return line
        raise ToolError(f"Line with phone number {phone_number} not found")

    def _target_line(self, customer_id: str, line_id: str) -> dict:
        customer = self.get_customer_by_id(customer_id)
        if line_id not in customer["line_ids"]:
            raise ToolError(f"Line {line_id} not found for customer {customer_id}")
        return self._line(line_id)

    def _awaiting_payment(self, customer: dict) -> list[dict]:
        return [b for b in (self._bill(i) for i in customer["bill_ids"])
                if b["status"] == "Awaiting Payment"]

    def _set_bill_to_paid(self, bill_id: str) -> None:
        self._bill(bill_id)["status"] = "Paid"

    def _charge(self, customer_id: str, amount: float, description: str) -> None:
        """Add a charge (or credit) to the customer's draft bill, opening one for next month."""
        customer = self.get_customer_by_id(customer_id)
        draft = next((b for b in (self._bill(i) for i in customer["bill_ids"])
                      if b["status"] == "Draft"), None)
        if draft is None:
            today = _date(TODAY)
            start = (today.replace(day=1) + datetime.timedelta(days=32)).replace(day=1)
            nxt = (start + datetime.timedelta(days=32)).replace(day=1)
            n = sum(1 for b in self.db["bills"] if b["bill_id"].startswith(f"B{customer_id}-draft"))
            draft = {"bill_id": f"B{customer_id}-draft-{n + 1}", "customer_id": customer_id,
                     "period_start": start.isoformat(),
                     "period_end": (nxt - datetime.timedelta(days=1)).isoformat(),
                     "issue_date": start.isoformat(), "total_due": 0.0,
                     "due_date": (start + datetime.timedelta(days=14)).isoformat(),
                     "line_items": [], "status": "Draft"}
            self.db["bills"].append(draft)
            customer["bill_ids"].append(draft["bill_id"])
        draft["line_items"].append({"description": description, "amount": amount, "date": TODAY,
                                    "item_type": "Credit" if amount < 0 else "Charge"})
        draft["total_due"] = round(draft["total_due"] + amount, 2)

    # -- tools -----------------------------------------------------------------------------------
    @tool("read")
    def get_customer_by_phone(self, phone_number: str) -> dict:
        """Find a customer by their contact phone number or the number of one of their lines.

        Args:
            phone_number: The phone number, such as '555-123-2002'.
        """
        for customer in self.db["customers"]:
            if customer["phone_number"] == phone_number:
                return customer
            for line_id in customer["line_ids"]:
                if self._line(line_id)["phone_number"] == phone_number:
                    return customer
        raise ToolError(f"Customer with phone number {phone_number} not found")

    @tool("read")
    def get_customer_by_id(self, customer_id: str) -> dict:
        """Return a customer by their id.

        Args:
            customer_id: The customer id, such as 'C1001'.
        """
        return self._find("customers", "customer_id", customer_id, "Customer")

    @tool("read")
    def get_customer_by_name(self, full_name: str, dob: str) -> list:
        """Find customers by full name and date of birth (the date tells namesakes apart).

        Args:
            full_name: The customer's full name, such as 'John Smith'.
            dob: Date of birth, 'YYYY-MM-DD'.
        """
        return [c for c in self.db["customers"]
                if c["full_name"].lower() == full_name.lower() and c["date_of_birth"] == dob]

    @tool("read")
    def get_details_by_id(self, id: str) -> dict:
        """Return the record with this id: a customer (C...), line (L...), device (D...), bill (B...)
        or plan (P...).

        Args:
            id: The id, such as 'L1002'.
        """
        tables = {"L": ("lines", "line_id", "Line"), "D": ("devices", "device_id", "Device"),
                  "B": ("bills", "bill_id", "Bill"), "C": ("customers", "customer_id", "Customer"),
                  "P": ("plans", "plan_id", "Plan")}
        if not id or id[0] not in tables:
            raise ToolError(f"Unknown ID format or type: {id}")
        return self._find(*((tables[id[0]][0], tables[id[0]][1], id, tables[id[0]][2])))

    @tool("write")
    def suspend_line(self, customer_id: str, line_id: str, reason: str) -> dict:
        """Suspend an active line (at most 6 months; a $5/month holding fee applies).

        Args:
            customer_id: The id of the customer who owns the line.
            line_id: The id of the line to suspend.
            reason: Why the line is suspended.
        """
        line = self._target_line(customer_id, line_id)
        if line["status"] != "Active":
            raise ToolError("Line must be active to suspend")
        line["status"] = "Suspended"
        line["suspension_start_date"] = TODAY
        return {"message": "Line suspended successfully. $5/month holding fee will apply.",
                "line": line}

    @tool("write")
    def resume_line(self, customer_id: str, line_id: str) -> dict:
        """Resume a suspended (or pending activation) line.

        Args:
            customer_id: The id of the customer who owns the line.
            line_id: The id of the line to resume.
        """
        line = self._target_line(customer_id, line_id)
        if line["status"] not in ("Suspended", "Pending Activation"):
            raise ToolError("Line must be suspended to resume")
        line["status"] = "Active"
        line["suspension_start_date"] = None
        return {"message": "Line resumed successfully", "line": line}

    @tool("read")
    def get_bills_for_customer(self, customer_id: str, limit: int = 12) -> list:
        """Return a customer's bills, newest first.

        Args:
            customer_id: The customer id, such as 'C1001'.
            limit: The most bills to return (default 12).
        """
        customer = self.get_customer_by_id(customer_id)
        bills = sorted((self._bill(i) for i in customer["bill_ids"]),
                       key=lambda b: b["issue_date"], reverse=True)
        return bills[:limit]

    @tool("write")
    def send_payment_request(self, customer_id: str, bill_id: str) -> str:
        """Ask the customer to pay a bill (its status becomes 'Awaiting Payment'; the customer then
        sees the request on their phone). Check first that the bill is not already paid; only one
        bill may await payment at a time.

        Args:
            customer_id: The id of the customer who owns the bill.
            bill_id: The id of the bill.
        """
        customer = self.get_customer_by_id(customer_id)
        if self._awaiting_payment(customer):
            raise ToolError("A bill is already awaiting payment for this customer")
        if bill_id not in customer["bill_ids"]:
            raise ToolError(f"Bill {bill_id} not found for customer {customer_id}")
        self._bill(bill_id)["status"] = "Awaiting Payment"
        return f"Payment request sent to the customer for bill {bill_id}"

    @tool("read")
    def get_data_usage(self, customer_id: str, line_id: str) -> dict:
        """Return a line's data use this billing cycle, its plan's limit, refuelled data and the
        cycle's end date.

        Args:
            customer_id: The id of the customer who owns the line.
            line_id: The id of the line.
        """
        line = self._target_line(customer_id, line_id)
        plan = self._plan(line["plan_id"])
        today = _date(TODAY)
        cycle_end = (today.replace(day=1) + datetime.timedelta(days=32)).replace(day=1) \
            - datetime.timedelta(days=1)
        return {"line_id": line_id, "data_used_gb": line["data_used_gb"],
                "data_limit_gb": plan["data_limit_gb"],
                "data_refueling_gb": line["data_refueling_gb"],
                "cycle_end_date": cycle_end.isoformat()}

    @tool("write")
    def enable_roaming(self, customer_id: str, line_id: str) -> str:
        """Turn on international roaming for a line.

        Args:
            customer_id: The id of the customer who owns the line.
            line_id: The id of the line.
        """
        line = self._target_line(customer_id, line_id)
        if line["roaming_enabled"]:
            return "Roaming was already enabled"
        line["roaming_enabled"] = True
        return "Roaming enabled successfully"

    @tool("write")
    def disable_roaming(self, customer_id: str, line_id: str) -> str:
        """Turn off international roaming for a line.

        Args:
            customer_id: The id of the customer who owns the line.
            line_id: The id of the line.
        """
        line = self._target_line(customer_id, line_id)
        if not line["roaming_enabled"]:
            return "Roaming was already disabled"
        line["roaming_enabled"] = False
        return "Roaming disabled successfully"

    @tool("generic")
    def transfer_to_human_agents(self, summary: str) -> str:
        """Hand the user over to a human agent with a summary of the issue. Only when the user asks
        for a human, or when the policy and the tools cannot solve the issue.

        Args:
            summary: A short summary of the user's issue.
        """
        return "Transfer successful"

    @tool("write")
    def refuel_data(self, customer_id: str, line_id: str, gb_amount: float) -> dict:
        """Add data to a line for this cycle; the plan's refuelling price per GB is charged on the
        next bill.

        Args:
            customer_id: The id of the customer who owns the line.
            line_id: The id of the line.
            gb_amount: How many GB to add (positive).
        """
        line = self._target_line(customer_id, line_id)
        if gb_amount <= 0:
            raise ToolError("Refuel amount must be positive")
        plan = self._plan(line["plan_id"])
        price = plan["data_refueling_price_per_gb"]
        charge = round(gb_amount * price, 2)
        line["data_refueling_gb"] = round(line["data_refueling_gb"] + gb_amount, 4)
        self._charge(customer_id, charge, f"Data refueling: {gb_amount} GB at ${price}/GB")
        return {"message": f"Successfully added {gb_amount} GB of data for line {line_id} "
                           f"for ${charge:.2f}",
                "new_data_refueling_gb": line["data_refueling_gb"], "charge": charge}

    # -- set-up functions and assertions used by task files (not tools) --------------------------
    def set_data_usage(self, customer_id: str, line_id: str, data_used_gb: float) -> str:
        self._target_line(customer_id, line_id)["data_used_gb"] = data_used_gb
        return f"Data usage set to {data_used_gb} GB for line {line_id}"

    def suspend_line_for_overdue_bill(self, customer_id: str, line_id: str, new_bill_id: str,
                                      contract_ended: bool) -> str:
        line = self._line(line_id)
        if line["status"] != "Active":
            raise ToolError("Line must be active to suspend for unpaid bill")
        amount = self._plan(line["plan_id"])["price_per_month"]
        customer = self.get_customer_by_id(customer_id)
        if any(self._bill(i)["status"] == "Overdue" for i in customer["bill_ids"]):
            raise ToolError("Customer already has an overdue bill")
        today = _date(TODAY)
        last_month_end = today.replace(day=1) - datetime.timedelta(days=1)
        last_month_start = last_month_end.replace(day=1)
        self.db["bills"].append({
            "bill_id": new_bill_id, "customer_id": customer_id,
            "period_start": last_month_start.isoformat(), "period_end": last_month_end.isoformat(),
            "issue_date": last_month_start.isoformat(), "total_due": amount,
            "due_date": (last_month_start + datetime.timedelta(days=14)).isoformat(),
            "line_items": [{"description": f"Charge for line {line_id}", "amount": amount,
                            "date": TODAY, "item_type": "Charge"}],
            "status": "Overdue"})
        customer["bill_ids"].append(new_bill_id)
        line["status"] = "Suspended"
        line["suspension_start_date"] = TODAY
        if contract_ended:
            line["contract_end_date"] = last_month_end.isoformat()
        return f"Line {line_id} suspended for unpaid bill {new_bill_id}."

    def assert_data_refueling_amount(self, customer_id: str, line_id: str,
                                     expected_amount: float) -> bool:
        return abs(self._target_line(customer_id, line_id)["data_refueling_gb"]
                   - expected_amount) < 1e-6

    def assert_line_status(self, customer_id: str, line_id: str, expected_status: str) -> bool:
        return self._target_line(customer_id, line_id)["status"] == expected_status

    def assert_no_overdue_bill(self, overdue_bill_id: str) -> bool:
        try:
            return self._bill(overdue_bill_id)["status"] == "Paid"
        except ToolError:
            return True
