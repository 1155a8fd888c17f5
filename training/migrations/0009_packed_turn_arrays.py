"""Turn's token ids and log-probs from JSON to packed binary arrays (``core.packed``), and, on
PostgreSQL, lz4 compression for the turn's large text columns (tool outputs run to kilobytes;
lz4 compresses several times faster than the default pglz, which the trajectory writer waits on).

Existing rows are converted in batches; the old JSON columns are dropped only after.
"""

from django.db import migrations, transaction
from django.db.utils import DatabaseError

import core.packed

ARRAYS = (("token_ids", "i"), ("logprobs", "d"), ("observation_token_ids", "i"))
LZ4_COLUMNS = ("observation", "sandbox_result", "code", "policy_text")
BATCH = 1000


def convert(apps, schema_editor):
    Turn = apps.get_model("training", "Turn")
    fields = [f"{name}_packed" for name, _ in ARRAYS]
    batch = []
    rows = Turn.objects.using(schema_editor.connection.alias).only(
        "pk", *(name for name, _ in ARRAYS)
    )
    for turn in rows.iterator(chunk_size=BATCH):
        for name, _ in ARRAYS:
            setattr(turn, f"{name}_packed", list(getattr(turn, name) or []))
        batch.append(turn)
        if len(batch) >= BATCH:
            Turn.objects.bulk_update(batch, fields)
            batch = []
    if batch:
        Turn.objects.bulk_update(batch, fields)


def unconvert(apps, schema_editor):
    Turn = apps.get_model("training", "Turn")
    for turn in Turn.objects.iterator(chunk_size=BATCH):
        for name, _ in ARRAYS:
            setattr(turn, name, list(getattr(turn, f"{name}_packed") or []))
        turn.save(update_fields=[name for name, _ in ARRAYS])


def compress_with_lz4(apps, schema_editor):
    """PostgreSQL 14+ built with lz4 (Debian's and the official images are); elsewhere the
    columns keep the server's default compression."""
    if schema_editor.connection.vendor != "postgresql":
        return
    table = apps.get_model("training", "Turn")._meta.db_table
    for column in LZ4_COLUMNS:
        try:
            with transaction.atomic(using=schema_editor.connection.alias):
                schema_editor.execute(
                    f'ALTER TABLE "{table}" ALTER COLUMN "{column}" SET COMPRESSION lz4'
                )
        except DatabaseError:  # no lz4 in this server: pglz stays
            return


class Migration(migrations.Migration):
    dependencies = [("training", "0008_trajectory_opening_grading")]

    operations = [
        *(
            migrations.AddField(
                model_name="turn",
                name=f"{name}_packed",
                field=core.packed.PackedArrayField(typecode=typecode),
            )
            for name, typecode in ARRAYS
        ),
        migrations.RunPython(convert, unconvert),
        *(migrations.RemoveField(model_name="turn", name=name) for name, _ in ARRAYS),
        *(
            migrations.RenameField(model_name="turn", old_name=f"{name}_packed", new_name=name)
            for name, _ in ARRAYS
        ),
        migrations.RunPython(compress_with_lz4, migrations.RunPython.noop),
    ]
