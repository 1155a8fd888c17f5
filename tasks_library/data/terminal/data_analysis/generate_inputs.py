"""Deterministic datasets for Crucible's data_analysis terminal tasks.

Writes each task's environment/data/<file> and the pristine copy tests/data/<file>.

Not run at import or at run time: the generated files are committed. To regenerate them
(byte for byte), in a virtual environment with the set's pins (Python 3.11 or later):

    pip install pandas==2.2.3 numpy==2.1.3 pyarrow==18.1.0 openpyxl==3.1.5 \
        python-docx==1.1.2 lxml==5.3.0
    python tasks_library/data/terminal/data_analysis/generate_inputs.py
"""

import shutil
import sqlite3
import sys
from datetime import date, datetime, timedelta
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent

FIRST = [
    "Ada",
    "Ben",
    "Chloe",
    "Dev",
    "Elena",
    "Farid",
    "Grace",
    "Hugo",
    "Ines",
    "Jonas",
    "Kira",
    "Liam",
    "Maya",
    "Noor",
    "Omar",
    "Priya",
    "Quinn",
    "Rosa",
    "Sami",
    "Tara",
    "Uma",
    "Victor",
    "Wen",
    "Xavier",
    "Yara",
    "Zane",
]
LAST = [
    "Abbott",
    "Baker",
    "Castro",
    "Dunn",
    "Eriksen",
    "Fischer",
    "Garcia",
    "Haddad",
    "Ito",
    "Jensen",
    "Kowalski",
    "Larsen",
    "Moreau",
    "Nakamura",
    "Okafor",
    "Petrov",
    "Quinlan",
    "Rossi",
    "Silva",
    "Tanaka",
    "Usman",
    "Varga",
    "Weber",
    "Xu",
    "Young",
    "Zhou",
]


def out(task, name):
    env = ROOT / task / "environment" / "data" / name
    env.parent.mkdir(parents=True, exist_ok=True)
    return env


def mirror(task, name):
    src = ROOT / task / "environment" / "data" / name
    dst = ROOT / task / "tests" / "data" / name
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, dst)


def csv(task, name, df):
    df.to_csv(out(task, name), index=False, lineterminator="\n")
    mirror(task, name)


def regional_sales():
    rng = np.random.default_rng(101)
    n = 2400
    regions = ["Central", "East", "North", "South", "West"]
    cats = {"Apparel": 24.0, "Electronics": 180.0, "Furniture": 240.0, "Office Supplies": 9.5}
    days = pd.date_range("2025-01-01", "2025-12-31", freq="D")
    cat = rng.choice(list(cats), n, p=[0.3, 0.25, 0.15, 0.3])
    price = np.array([cats[c] for c in cat]) * rng.uniform(0.6, 1.5, n)
    df = pd.DataFrame(
        {
            "order_id": [f"SO-{100001 + i}" for i in range(n)],
            "order_date": rng.choice(days, n).astype("datetime64[ns]"),
            "region": rng.choice(regions, n, p=[0.15, 0.25, 0.2, 0.18, 0.22]),
            "category": cat,
            "units": rng.integers(1, 21, n),
            "unit_price": np.round(price, 2),
            "discount_pct": rng.choice([0, 0, 0, 5, 10, 15, 20], n),
            "status": rng.choice(["completed", "cancelled", "returned"], n, p=[0.84, 0.1, 0.06]),
        }
    )
    df = df.sort_values(["order_date", "order_id"]).reset_index(drop=True)
    df["order_date"] = df["order_date"].dt.strftime("%Y-%m-%d")
    csv("regional-sales-summary", "sales.csv", df)


def customer_orders():
    rng = np.random.default_rng(202)
    countries = ["Brazil", "Canada", "France", "Germany", "India", "Japan", "Kenya", "Spain"]
    nums = np.sort(rng.choice(np.arange(1, 421), 400, replace=False))
    cust = pd.DataFrame(
        {
            "customer_id": [f"CUST-{k:05d}" for k in nums],
            "name": [f"{rng.choice(FIRST)} {rng.choice(LAST)}" for _ in nums],
            "country": rng.choice(countries, len(nums)),
            "segment": rng.choice(
                ["Consumer", "Corporate", "Small Business"], len(nums), p=[0.55, 0.25, 0.2]
            ),
            "signup_date": [
                (date(2022, 1, 1) + timedelta(days=int(d))).isoformat()
                for d in rng.integers(0, 900, len(nums))
            ],
        }
    )
    n = 3000
    # most orders go to known customers with a skewed activity; a few to unknown numbers
    weights = rng.pareto(1.2, len(nums)) + 0.05
    weights[rng.choice(len(nums), 60, replace=False)] = 0.0  # customers who never ordered
    weights /= weights.sum()
    known = rng.choice(nums, n, p=weights)
    unknown_pool = np.setdiff1d(np.arange(1, 436), nums)
    orphan = rng.random(n) < 0.03
    cust_no = np.where(orphan, rng.choice(unknown_pool, n), known)
    orders = pd.DataFrame(
        {
            "order_id": np.arange(500001, 500001 + n),
            "cust_no": cust_no,
            "order_date": [
                (date(2024, 1, 1) + timedelta(days=int(d))).isoformat()
                for d in rng.integers(0, 366, n)
            ],
            "amount": np.round(rng.lognormal(4.2, 0.8, n), 2),
        }
    )
    csv("customer-orders-join", "customers.csv", cust)
    csv("customer-orders-join", "orders.csv", orders)


def library_loans():
    rng = np.random.default_rng(303)
    task = "sqlite-library-loans"
    path = out(task, "library.db")
    if path.exists():
        path.unlink()
    con = sqlite3.connect(path)
    # the schema text is stored in the database as written: its long lines stay
    con.executescript(
        """
    CREATE TABLE books (book_id INTEGER PRIMARY KEY, title TEXT NOT NULL, author TEXT NOT NULL,
                        genre TEXT NOT NULL, published_year INTEGER);
    CREATE TABLE members (member_id INTEGER PRIMARY KEY, name TEXT NOT NULL, joined_on TEXT NOT NULL);
    CREATE TABLE loans (loan_id INTEGER PRIMARY KEY, book_id INTEGER NOT NULL REFERENCES books(book_id),
                        member_id INTEGER NOT NULL REFERENCES members(member_id),
                        loaned_on TEXT NOT NULL, due_on TEXT NOT NULL, returned_on TEXT);
    """  # noqa: E501
    )
    genres = ["Biography", "Fantasy", "History", "Mystery", "Science", "Romance"]
    words = [
        "River",
        "Shadow",
        "Garden",
        "Atlas",
        "Winter",
        "Copper",
        "Signal",
        "Harbor",
        "Lantern",
        "Orchard",
        "Tide",
        "Engine",
        "Meadow",
        "Cipher",
        "Ember",
        "Summit",
    ]
    books = []
    for b in range(1, 121):
        title = f"The {rng.choice(words)} of {rng.choice(words)}"
        books.append(
            (
                b,
                title,
                f"{rng.choice(FIRST)} {rng.choice(LAST)}",
                str(rng.choice(genres)),
                int(rng.integers(1950, 2025)),
            )
        )
    con.executemany("INSERT INTO books VALUES (?,?,?,?,?)", books)
    members = [
        (
            m,
            f"{rng.choice(FIRST)} {rng.choice(LAST)}",
            (date(2020, 1, 1) + timedelta(days=int(rng.integers(0, 1400)))).isoformat(),
        )
        for m in range(1, 81)
    ]
    con.executemany("INSERT INTO members VALUES (?,?,?)", members)
    pop = rng.pareto(1.5, 120) + 0.02
    pop[rng.choice(120, 9, replace=False)] = 0.0
    pop /= pop.sum()
    asof = date(2025, 6, 30)
    loans = []
    for lid in range(1, 1501):
        book = int(rng.choice(np.arange(1, 121), p=pop))
        member = int(rng.integers(1, 81))
        loaned = date(2024, 1, 1) + timedelta(days=int(rng.integers(0, 547)))
        due = loaned + timedelta(days=21)
        r = rng.random()
        returned = None
        if r < 0.9:
            ret = loaned + timedelta(days=int(rng.integers(2, 36)))
            if ret <= asof:
                returned = ret.isoformat()
        loans.append((lid, book, member, loaned.isoformat(), due.isoformat(), returned))
    con.executemany("INSERT INTO loans VALUES (?,?,?,?,?,?)", loans)
    con.commit()
    con.execute("VACUUM")
    con.close()
    mirror(task, "library.db")


def sensor_readings():
    rng = np.random.default_rng(404)
    rows = []
    start = datetime(2025, 3, 10, 0, 0, 0)
    end = datetime(2025, 3, 13, 0, 0, 0)
    gaps = {
        "S2": [(datetime(2025, 3, 11, 3), datetime(2025, 3, 11, 5))],
        "S3": [
            (datetime(2025, 3, 10, 14), datetime(2025, 3, 10, 19)),
            (datetime(2025, 3, 12, 22), datetime(2025, 3, 13, 0)),
        ],
        "S4": [(datetime(2025, 3, 12, 8), datetime(2025, 3, 12, 9))],
    }
    base = {"S1": 19.0, "S2": 21.5, "S3": 17.0, "S4": 23.0}
    for s in ["S1", "S2", "S3", "S4"]:
        t = start + timedelta(seconds=int(rng.integers(0, 600)))
        while t < end:
            if not any(a <= t < b for a, b in gaps.get(s, [])):
                hour = t.hour + t.minute / 60
                temp = base[s] + 3.0 * np.sin((hour - 9) / 24 * 2 * np.pi) + rng.normal(0, 0.4)
                rows.append((t.strftime("%Y-%m-%d %H:%M:%S"), s, round(float(temp), 2)))
            t += timedelta(seconds=int(rng.integers(300, 1000)))
    df = pd.DataFrame(rows, columns=["timestamp", "sensor_id", "temperature_c"])
    df = df.sample(frac=1.0, random_state=7).reset_index(drop=True)
    csv("sensor-hourly-resample", "readings.csv", df)


def transactions_outliers():
    rng = np.random.default_rng(505)
    cats = {
        "grocery": (3.6, 0.5),
        "fuel": (3.9, 0.3),
        "electronics": (5.3, 0.7),
        "restaurants": (3.4, 0.6),
        "travel": (6.0, 0.5),
        "pharmacy": (3.0, 0.45),
    }
    frames = []
    for c, (mu, sd) in cats.items():
        n = int(rng.integers(260, 340))
        amt = rng.lognormal(mu, sd, n)
        k = int(rng.integers(3, 9))
        idx = rng.choice(n, k, replace=False)
        amt[idx[: k // 2]] *= rng.uniform(4, 9, k // 2)
        amt[idx[k // 2 :]] *= rng.uniform(0.02, 0.1, k - k // 2)
        amt = np.round(amt, 2)
        for _ in range(50):  # keep every amount clearly away from its fences
            q1, q3 = np.quantile(amt, [0.25, 0.75])
            lo, hi = q1 - 1.5 * (q3 - q1), q3 + 1.5 * (q3 - q1)
            close = (np.abs(amt - lo) < 0.05) | (np.abs(amt - hi) < 0.05)
            if not close.any():
                break
            amt[close] = np.round(amt[close] + 0.11, 2)
        frames.append(pd.DataFrame({"merchant_category": c, "amount": amt}))
    df = pd.concat(frames).sample(frac=1.0, random_state=3).reset_index(drop=True)
    df.insert(0, "txn_id", [f"T{700000 + i}" for i in range(len(df))])
    df["card_last4"] = [f"{x:04d}" for x in rng.integers(0, 10000, len(df))]
    csv("transaction-outliers-iqr", "transactions.csv", df)


def contacts():
    rng = np.random.default_rng(606)
    cities = ["Austin", "Boston", "Chicago", "Denver", "Portland", "Seattle", "Tampa"]
    people = []
    used = set()
    while len(people) < 520:
        first, last = rng.choice(FIRST), rng.choice(LAST)
        number = int(rng.integers(1, 99))
        tld = rng.choice(["com", "org", "net"])
        email = f"{first}.{last}{number}@example.{tld}".lower()
        if email in used:
            continue
        used.add(email)
        area, exchange = int(rng.integers(200, 999)), int(rng.integers(200, 999))
        phone = f"{area}{exchange}{int(rng.integers(0, 10000)):04d}"
        people.append((f"{first} {last}", email, phone, str(rng.choice(cities))))

    def fmt_phone(p):
        k = int(rng.integers(0, 7))
        return [
            f"({p[:3]}) {p[3:6]}-{p[6:]}",
            f"{p[:3]}.{p[3:6]}.{p[6:]}",
            f"+1 {p[:3]} {p[3:6]} {p[6:]}",
            p,
            f"1-{p[:3]}-{p[3:6]}-{p[6:]}",
            f"{p[:3]}-{p[3:6]}-{p[6:]}",
            f"{p[3:6]}-{p[6:]}",
        ][k]

    def fmt_email(e):
        k = int(rng.integers(0, 5))
        return [e, e.upper(), f"  {e}", e.title(), f"{e} "][k]

    def fmt_name(n):
        k = int(rng.integers(0, 4))
        return [n, f" {n}", n.replace(" ", "   "), f"{n}  "][k]

    rows = []
    base_time = datetime(2024, 1, 1)
    for name, email, phone, city in people:
        copies = 1 + (int(rng.choice([1, 2, 3], p=[0.6, 0.3, 0.1])) if rng.random() < 0.3 else 0)
        times = [base_time + timedelta(minutes=int(rng.integers(0, 600000))) for _ in range(copies)]
        if copies > 1 and rng.random() < 0.2:
            times[1] = times[0]  # a tie on updated_at
        for t in times:
            c = city if rng.random() > 0.15 else str(rng.choice(cities))
            rows.append(
                [
                    fmt_name(name),
                    fmt_email(email),
                    fmt_phone(phone),
                    c,
                    t.strftime("%Y-%m-%d %H:%M:%S"),
                ]
            )
    for _ in range(12):  # rows without a usable email
        first, last = rng.choice(FIRST), rng.choice(LAST)
        bad = ["", f"{first}.{last}.example.com", "  ", "n/a"][int(rng.integers(0, 4))]
        rows.append(
            [
                f"{first} {last}",
                bad,
                fmt_phone("5550001111"),
                str(rng.choice(cities)),
                (base_time + timedelta(minutes=int(rng.integers(0, 600000)))).strftime(
                    "%Y-%m-%d %H:%M:%S"
                ),
            ]
        )
    order = rng.permutation(len(rows))
    rows = [rows[i] for i in order]
    df = pd.DataFrame(rows, columns=["full_name", "email", "phone", "city", "updated_at"])
    df.insert(0, "id", np.arange(1, len(df) + 1))
    csv("contacts-dedupe", "contacts.csv", df)


def trips():
    rng = np.random.default_rng(707)
    n = 5000
    zones = ["Airport", "Downtown", "Harbor", "Midtown", "Old Town", "University"]
    start = np.datetime64("2025-05-01T00:00:00")
    hour_w = np.array(
        [
            1,
            0.6,
            0.4,
            0.3,
            0.3,
            0.5,
            1.2,
            2.2,
            3.0,
            2.4,
            1.8,
            1.9,
            2.1,
            2.0,
            1.9,
            2.2,
            2.6,
            3.2,
            3.6,
            2.9,
            2.3,
            2.0,
            1.7,
            1.3,
        ]
    )
    hour_w /= hour_w.sum()
    day = rng.integers(0, 31, n)
    hour = rng.choice(24, n, p=hour_w)
    sec = rng.integers(0, 3600, n)
    pickup = start + (day * 86400 + hour * 3600 + sec).astype("timedelta64[s]")
    dist = np.round(rng.gamma(2.0, 3.2, n), 2)
    dur = (dist * rng.uniform(90, 240, n) + rng.integers(120, 600, n)).astype(int)
    bad_time = rng.random(n) < 0.012
    dur[bad_time] = -rng.integers(0, 300, bad_time.sum())
    bad_dist = rng.random(n) < 0.01
    dist[bad_dist] = 0.0
    dropoff = pickup + dur.astype("timedelta64[s]")
    fare = np.round(3.5 + dist * rng.uniform(1.6, 2.4, n) + np.maximum(dur, 0) / 60 * 0.35, 2)
    table = pa.table(
        {
            "trip_id": pa.array(np.arange(1, n + 1), pa.int32()),
            "pickup_at": pa.array(pickup.astype("datetime64[us]"), pa.timestamp("us")),
            "dropoff_at": pa.array(dropoff.astype("datetime64[us]"), pa.timestamp("us")),
            "pickup_zone": pa.array(
                rng.choice(zones, n, p=[0.12, 0.3, 0.12, 0.22, 0.12, 0.12])
            ).dictionary_encode(),
            "distance_km": pa.array(dist, pa.float64()),
            "fare": pa.array(fare, pa.float64()),
            "payment_type": pa.array(
                rng.choice(["card", "cash", "voucher"], n, p=[0.68, 0.27, 0.05])
            ).dictionary_encode(),
        }
    )
    pq.write_table(table, out("trips-parquet", "trips.parquet"), compression="zstd")
    mirror("trips-parquet", "trips.parquet")


def daily_sales():
    rng = np.random.default_rng(808)
    lines = {"Bikes": 2400.0, "Accessories": 650.0, "Service": 900.0}
    rows = []
    for d in pd.date_range("2024-01-01", "2024-12-31", freq="D"):
        season = 1 + 0.35 * np.sin((d.dayofyear - 80) / 366 * 2 * np.pi)
        for line, base in lines.items():
            if rng.random() < 0.06:
                continue
            rows.append(
                (
                    d.strftime("%Y-%m-%d"),
                    line,
                    round(float(base * season * rng.lognormal(0, 0.25)), 2),
                )
            )
    df = pd.DataFrame(rows, columns=["date", "product_line", "revenue"])
    csv("chart-monthly-revenue", "daily_sales.csv", df)


def latency():
    rng = np.random.default_rng(909)
    n = 4000
    eps = ["/api/search", "/api/cart", "/api/checkout", "/api/profile"]
    lat = np.round(rng.lognormal(5.0, 0.65, n), 1)
    edge = rng.random(n) < 0.02
    lat[edge] = rng.integers(1, 21, edge.sum()) * 50.0  # values exactly on bin edges
    df = pd.DataFrame(
        {
            "request_id": [f"r{i:05d}" for i in range(n)],
            "endpoint": rng.choice(eps, n),
            "latency_ms": lat,
        }
    )
    csv("chart-latency-histogram", "latency.csv", df)


def cohorts():
    rng = np.random.default_rng(1010)
    n = 1500
    signup = [date(2024, 1, 1) + timedelta(days=int(d)) for d in rng.integers(0, 182, n)]
    users = pd.DataFrame(
        {
            "user_id": np.arange(1, n + 1),
            "signup_date": [s.isoformat() for s in signup],
            "plan": rng.choice(["free", "pro"], n, p=[0.8, 0.2]),
        }
    )
    ev = []
    end = date(2024, 6, 30)
    for uid, s in zip(users.user_id, signup):
        engagement = rng.beta(0.8, 2.0)
        d = s
        while d <= end:
            if rng.random() < engagement:
                ev.append(
                    (
                        int(uid),
                        d.isoformat(),
                        str(rng.choice(["login", "view", "purchase"], p=[0.5, 0.4, 0.1])),
                    )
                )
            d += timedelta(days=int(rng.integers(3, 15)))
    events = pd.DataFrame(ev, columns=["user_id", "event_date", "event_type"])
    events = events.sample(frac=1.0, random_state=11).reset_index(drop=True)
    csv("cohort-retention", "users.csv", users)
    csv("cohort-retention", "events.csv", events)


def survey():
    rng = np.random.default_rng(1111)
    n = 1200
    ages = ["18-24", "25-34", "35-44", "45-54", "55-64", "65+"]
    age = rng.choice(ages, n)
    shift = {a: i * 0.12 for i, a in enumerate(ages)}
    sat = np.clip(
        np.round(rng.normal(3.1, 1.1, n) + np.array([shift[a] for a in age])), 1, 5
    ).astype(int)
    sat_s = [str(s) for s in sat]
    for i in rng.choice(n, 70, replace=False):
        sat_s[i] = ["", "NA", "n/a"][int(rng.integers(0, 3))]
    df = pd.DataFrame(
        {
            "respondent_id": np.arange(1, n + 1),
            "age_group": age,
            "region": rng.choice(["North", "South", "East", "West"], n),
            "satisfaction": sat_s,
            "weight": np.round(rng.uniform(0.3, 3.0, n), 3),
        }
    )
    csv("survey-weighted-means", "survey.csv", df)


def stocks():
    rng = np.random.default_rng(1212)
    days = pd.bdate_range("2023-01-02", "2024-12-31")
    frames = []
    for tk, (p0, mu, sig) in {
        "ACME": (52.0, 0.0004, 0.018),
        "BOLT": (118.0, 0.0007, 0.025),
        "CRUX": (23.5, -0.0002, 0.031),
        "DYNA": (310.0, 0.0003, 0.012),
    }.items():
        r = rng.normal(mu, sig, len(days))
        r[int(rng.integers(50, 400))] = -0.19  # one crash day
        close = np.round(p0 * np.exp(np.cumsum(r)), 2)
        keep = rng.random(len(days)) > 0.03
        frames.append(
            pd.DataFrame(
                {"date": days[keep].strftime("%Y-%m-%d"), "ticker": tk, "close": close[keep]}
            )
        )
    df = pd.concat(frames).sample(frac=1.0, random_state=5).reset_index(drop=True)
    csv("stock-drawdown", "prices.csv", df)


if __name__ == "__main__":
    for f in [
        regional_sales,
        customer_orders,
        library_loans,
        sensor_readings,
        transactions_outliers,
        contacts,
        trips,
        daily_sales,
        latency,
        cohorts,
        survey,
        stocks,
    ]:
        f()
    for p in sorted(ROOT.glob("*/environment/data/*")):
        print(p.relative_to(ROOT), p.stat().st_size)
