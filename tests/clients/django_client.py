"""The client scenario with the Django ORM (run by django.sh).

Settings are configured in code (no project). The fence token column is a
BigIntegerField: the token arrives as a Python int, and the stale-write error
(SQLSTATE 23T01) as django.db.IntegrityError whose __cause__ is psycopg2's
IntegrityError (pgcode, diag.message_detail, diag.message_hint).
Connection parameters come from the libpq environment (PGHOST, PGPORT, ...).
"""
import os
import sys
import time

import django
from django.conf import settings

settings.configure(
    DATABASES={"default": {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": os.environ.get("PGDATABASE", "postgres"),
        "USER": os.environ.get("PGUSER", "postgres"),
        "HOST": os.environ.get("PGHOST", ""),
        "PORT": os.environ.get("PGPORT", ""),
    }},
    INSTALLED_APPS=[],
    USE_TZ=True,
)
django.setup()

from django.db import IntegrityError, OperationalError, connection, connections, models, transaction  # noqa: E402

RESOURCE = "clients:django"
ABOVE_2_53 = 9007199254740993  # 2^53 + 1
failures = 0


class Ledger(models.Model):
    balance = models.BigIntegerField()
    fence_token = models.BigIntegerField(null=True)  # fencing.token in the database

    class Meta:
        app_label = "fencing_clients"
        db_table = "django_ledger"


def check(ok, what):
    global failures
    print(("ok - " if ok else "FAILED - ") + what, flush=True)
    if not ok:
        failures += 1


def one(sql, params=()):
    with connection.cursor() as cur:
        cur.execute(sql, params)
        return cur.fetchone()[0]


def main():
    with connection.cursor() as cur:
        cur.execute("SET client_min_messages = warning")
        cur.execute("CREATE EXTENSION IF NOT EXISTS fencing")
        cur.execute("DROP TABLE IF EXISTS django_ledger")
        cur.execute("CREATE TABLE django_ledger (id int PRIMARY KEY, balance bigint NOT NULL, fence_token fencing.token)")
        # protect() refuses tables holding tokens past 2^52: protect first, then a
        # superuser moves the counter past 2^53 + 1.
        cur.execute("SELECT fencing.protect('django_ledger')")
        cur.execute("SELECT fencing.advance_past('django_ledger', %s)", (ABOVE_2_53,))
        cur.execute("INSERT INTO django_ledger VALUES (1, 0, %s)", (ABOVE_2_53,))

    # (1) Django runs in autocommit mode outside atomic(): a session lock.
    t1 = one("SELECT fencing.acquire(%s)", (RESOURCE,))
    check(type(t1) is int and t1 > ABOVE_2_53, f"acquire: T1 = {t1} is an int above 2^53 + 1")
    try:
        one("SELECT fencing.acquire(%s)", (RESOURCE,))
        check(False, "a second plain acquire fails")
    except OperationalError as e:  # class 55 maps to OperationalError
        check(e.__cause__.pgcode == "55006", f"a second plain acquire fails with OperationalError (55006)")

    # (2) ORM write and read back as an int.
    check(Ledger.objects.filter(pk=1).update(fence_token=t1) == 1, "ORM write with T1 accepted")
    stored = Ledger.objects.get(pk=1).fence_token
    check(type(stored) is int and stored == t1, f"T1 read back exactly through the ORM ({stored})")
    one("SELECT fencing.release(%s)", (RESOURCE,))
    # A second acquirer on its own connection.
    other = connections.create_connection("default")
    with other.cursor() as cur:
        cur.execute("SELECT fencing.acquire(%s, wait => '10 s')", (RESOURCE,))
        t2 = cur.fetchone()[0]
    check(t2 > t1 and Ledger.objects.filter(pk=1).update(fence_token=t2) == 1, "T2 > T1, ORM write with T2 accepted")

    # (3) the stale ORM write.
    row = Ledger.objects.get(pk=1)
    row.fence_token = t1
    try:
        row.save()
        check(False, "stale write rejected")
    except IntegrityError as e:
        cause = e.__cause__
        check(cause.pgcode == "23T01", f"stale save() raises django.db.IntegrityError, __cause__.pgcode {cause.pgcode}")
        check(bool(cause.diag.message_detail) and bool(cause.diag.message_hint)
              and 'stale fence token for relation "django_ledger"' in str(e),
              "message, detail and hint reachable through __cause__.diag")
    check(Ledger.objects.get(pk=1).fence_token == t2, "the connection is usable after the error; the row holds T2")
    with other.cursor() as cur:
        cur.execute("SELECT fencing.release(%s)", (RESOURCE,))
    other.close()

    # (4) acquire_xact inside transaction.atomic().
    with transaction.atomic():
        t3 = one("SELECT fencing.acquire_xact(%s)", (RESOURCE,))
        Ledger.objects.filter(pk=1).update(fence_token=t3)
    check(t3 > t2 and one("SELECT count(*) FROM fencing.locks WHERE resource = %s", (RESOURCE,)) == 0,
          "acquire_xact in transaction.atomic(): T3 > T2, the lock ended with the commit")
    # (5) use(%s), then an ORM write that carries no token.
    with transaction.atomic():
        t4 = one("SELECT fencing.acquire_xact(%s)", (RESOURCE,))
        one("SELECT fencing.use(%s)", (t4,))
        Ledger.objects.filter(pk=1).update(balance=models.F("balance") + 1)
    check(Ledger.objects.get(pk=1).fence_token == t4, "use(%s) stamped the ORM write that carries no token with T4")

    # (6) lease expiry: the server ends the silent holder's connection.
    t5 = one("SELECT fencing.acquire(%s, lease => '1 s')", (RESOURCE,))
    time.sleep(2.5)
    try:
        one("SELECT 1")
        check(False, "the connection of the expired lease was ended")
    except OperationalError as e:
        check(connection.connection.closed != 0, f"the expired lease ended the connection (OperationalError)")
    connection.close()  # Django reconnects on the next query
    t6 = one("SELECT fencing.acquire(%s)", (RESOURCE,))
    check(t6 > t5 and Ledger.objects.filter(pk=1).update(fence_token=t6) == 1,
          "reconnected: acquired again with a greater token and wrote")
    try:
        Ledger.objects.filter(pk=1).update(fence_token=t5)
        check(False, "the expired lease's token is stale")
    except IntegrityError as e:
        check(e.__cause__.pgcode == "23T01", "a write with the expired lease's token fails with 23T01")
    one("SELECT fencing.release_all()")
    connection.close()
    print(f"Django {django.get_version()}: " + (f"{failures} check(s) failed" if failures else "all checks passed"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
