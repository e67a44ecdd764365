"""Fixtures shared by the whole test suite."""

# The real-mongod fixtures: mongodb_uri (session; DOGS_TEST_MONGODB_URI or a mongod started for
# the session), mongo_database_name, sync_mongo_client and async_mongo_client.
pytest_plugins = ["dogs_mongo.testing"]
