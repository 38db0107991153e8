"""The client scenario with the SQLAlchemy ORM (run by sqlalchemy.sh).

The fence token column is an ordinary BigInteger mapped column: the token
arrives as a Python int, and the stale-write error (SQLSTATE 23T01) as
sqlalchemy.exc.IntegrityError wrapping the driver's (psycopg2)
IntegrityError, whose pgcode and diag carry SQLSTATE, detail and hint.
Connection parameters come from the libpq environment (PGHOST, PGPORT, ...).
"""
import sys
import time

import sqlalchemy
from sqlalchemy import BigInteger, Column, Integer, create_engine, exc, select, text
from sqlalchemy.orm import Session, declarative_base

RESOURCE = "clients:sqlalchemy"
ABOVE_2_53 = 9007199254740993  # 2^53 + 1
failures = 0
Base = declarative_base()


class Ledger(Base):
    __tablename__ = "sqlalchemy_ledger"
    id = Column(Integer, primary_key=True)
    balance = Column(BigInteger, nullable=False)
    fence_token = Column(BigInteger)  # fencing.token in the database; a bigint to the ORM


def check(ok, what):
    global failures
    print(("ok - " if ok else "FAILED - ") + what, flush=True)
    if not ok:
        failures += 1


def main():
    # "postgresql://" with no host: psycopg2/libpq take PGHOST, PGPORT, PGUSER, PGDATABASE.
    engine = create_engine("postgresql+psycopg2://", future=True)
    with engine.begin() as c:
        c.execute(text("SET client_min_messages = warning"))
        c.execute(text("CREATE EXTENSION IF NOT EXISTS fencing"))
        c.execute(text("DROP TABLE IF EXISTS sqlalchemy_ledger"))
        c.execute(text("CREATE TABLE sqlalchemy_ledger (id int PRIMARY KEY, balance bigint NOT NULL, "
                       "fence_token fencing.token)"))
        # protect() refuses tables holding tokens past 2^52: protect first, then a
        # superuser moves the counter past 2^53 + 1.
        c.execute(text("SELECT fencing.protect('sqlalchemy_ledger')"))
        c.execute(text("SELECT fencing.advance_past('sqlalchemy_ledger', :t)"), {"t": ABOVE_2_53})
        c.execute(text("INSERT INTO sqlalchemy_ledger VALUES (1, 0, :t)"), {"t": ABOVE_2_53})

    # A lock connection in autocommit mode: the session lock outlives transactions.
    lock1 = engine.connect().execution_options(isolation_level="AUTOCOMMIT")
    t1 = lock1.scalar(text("SELECT fencing.acquire(:r)"), {"r": RESOURCE})
    check(type(t1) is int and t1 > ABOVE_2_53, f"acquire: T1 = {t1} is an int above 2^53 + 1")
    try:
        lock1.scalar(text("SELECT fencing.acquire(:r)"), {"r": RESOURCE})
        check(False, "a second plain acquire fails")
    except exc.OperationalError as e:  # class 55 maps to OperationalError
        check(e.orig.pgcode == "55006", f"a second plain acquire fails with {type(e).__name__} ({e.orig.pgcode})")

    # (2) ORM write of the token, read back as an int.
    with Session(engine) as s, s.begin():
        row = s.get(Ledger, 1)
        row.fence_token = t1
        row.balance += 1
    with Session(engine) as s:
        stored = s.scalar(select(Ledger.fence_token).where(Ledger.id == 1))
    check(type(stored) is int and stored == t1, f"T1 written and read back exactly through the ORM ({stored})")
    lock1.scalar(text("SELECT fencing.release(:r)"), {"r": RESOURCE})

    lock2 = engine.connect().execution_options(isolation_level="AUTOCOMMIT")
    t2 = lock2.scalar(text("SELECT fencing.acquire(:r, wait => '10 s')"), {"r": RESOURCE})
    with Session(engine) as s, s.begin():
        s.get(Ledger, 1).fence_token = t2
    check(t2 > t1, "T2 > T1, ORM write with T2 accepted")

    # (3) the stale ORM write: sqlalchemy.exc.IntegrityError at flush.
    s = Session(engine)
    try:
        with s.begin():
            s.get(Ledger, 1).fence_token = t1
        check(False, "stale write rejected")
    except exc.IntegrityError as e:
        check(e.orig.pgcode == "23T01", f"stale write raises sqlalchemy IntegrityError, orig.pgcode {e.orig.pgcode}")
        check(bool(e.orig.diag.message_detail) and bool(e.orig.diag.message_hint)
              and 'stale fence token for relation "sqlalchemy_ledger"' in str(e.orig),
              "message, detail and hint reachable through e.orig")
    check(s.scalar(select(Ledger.fence_token).where(Ledger.id == 1)) == t2,
          "the session is usable after the error; the row holds T2")
    s.close()
    lock2.scalar(text("SELECT fencing.release(:r)"), {"r": RESOURCE})

    # (4) acquire_xact inside session.begin(); (5) use(:t) and a write with no token.
    with Session(engine) as s:
        with s.begin():
            t3 = s.scalar(text("SELECT fencing.acquire_xact(:r)"), {"r": RESOURCE})
            s.get(Ledger, 1).fence_token = t3
        check(t3 > t2 and s.scalar(text("SELECT count(*) FROM fencing.locks WHERE resource = :r"),
                                   {"r": RESOURCE}) == 0,
              "acquire_xact in session.begin(): T3 > T2, the lock ended with the commit")
        s.commit()
        with s.begin():
            t4 = s.scalar(text("SELECT fencing.acquire_xact(:r)"), {"r": RESOURCE})
            s.execute(text("SELECT fencing.use(:t)"), {"t": t4})
            s.get(Ledger, 1).balance += 1  # the UPDATE does not name fence_token
        s.expire_all()
        check(s.scalar(select(Ledger.fence_token).where(Ledger.id == 1)) == t4,
              "use(:t) stamped the ORM write that carries no token with T4")
        s.commit()

    # (6) lease expiry: the server ends the silent holder's connection.
    lock3 = engine.connect().execution_options(isolation_level="AUTOCOMMIT")
    t5 = lock3.scalar(text("SELECT fencing.acquire(:r, lease => '1 s')"), {"r": RESOURCE})
    time.sleep(2.5)
    try:
        lock3.scalar(text("SELECT 1"))
        check(False, "the connection of the expired lease was ended")
    except exc.OperationalError as e:
        check(e.connection_invalidated, f"the expired lease ended the connection (OperationalError, invalidated)")
    lock3.close()
    lock4 = engine.connect().execution_options(isolation_level="AUTOCOMMIT")
    t6 = lock4.scalar(text("SELECT fencing.acquire(:r)"), {"r": RESOURCE})
    with Session(engine) as s, s.begin():
        s.get(Ledger, 1).fence_token = t6
    check(t6 > t5, "reconnected: acquired again with a greater token and wrote")
    try:
        with Session(engine) as s, s.begin():
            s.get(Ledger, 1).fence_token = t5
        check(False, "the expired lease's token is stale")
    except exc.IntegrityError as e:
        check(e.orig.pgcode == "23T01", "a write with the expired lease's token fails with 23T01")
    lock4.scalar(text("SELECT fencing.release_all()"))
    lock4.close()
    lock1.close()
    lock2.close()
    engine.dispose()
    print(f"SQLAlchemy {sqlalchemy.__version__}: " + (f"{failures} check(s) failed" if failures else "all checks passed"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
