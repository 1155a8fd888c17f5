#!/bin/bash
set -euo pipefail
cat > /app/overdue.sql <<'SQL'
SELECT m.member_id, m.name, COUNT(*) AS overdue_count, MIN(l.due_on) AS oldest_due_on
FROM loans AS l JOIN members AS m ON m.member_id = l.member_id
WHERE l.returned_on IS NULL AND l.due_on < '2025-06-30'
GROUP BY m.member_id, m.name
ORDER BY overdue_count DESC, m.member_id ASC;
SQL
python3 - <<'PY'
import json, sqlite3
con = sqlite3.connect("file:/app/data/library.db?mode=ro", uri=True)
q = lambda sql: con.execute(sql).fetchall()
answer = {
    "top_books": [r[0] for r in q("""SELECT book_id FROM loans GROUP BY book_id
                                     ORDER BY COUNT(*) DESC, book_id LIMIT 5""")],
    "never_borrowed": q("SELECT COUNT(*) FROM books WHERE book_id NOT IN (SELECT book_id FROM loans)")[0][0],
    "avg_loan_days_by_genre": {g: round(d, 2) for g, d in q("""
        SELECT b.genre, AVG(julianday(l.returned_on) - julianday(l.loaned_on))
        FROM loans l JOIN books b USING (book_id) WHERE l.returned_on IS NOT NULL GROUP BY b.genre""")},
    "late_return_rate": round(q("""SELECT AVG(returned_on > due_on) FROM loans
                                   WHERE returned_on IS NOT NULL""")[0][0], 4),
    "overdue_loans": q("""SELECT COUNT(*) FROM loans WHERE returned_on IS NULL
                          AND due_on < '2025-06-30'""")[0][0],
}
json.dump(answer, open("/app/answer.json", "w"), indent=2)
PY
