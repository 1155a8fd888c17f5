from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("tasks_library", "0005_reference_profile"),
    ]

    operations = [
        migrations.AddField(
            model_name="testsuiteversion",
            name="setup_code",
            field=models.TextField(blank=True, default=""),
        ),
    ]
