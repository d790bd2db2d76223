"""The one place where the versions of the services we run are pinned.

The local stack resolves exactly this Kafka from Maven Central; the compose
files name the same version (a test checks that they agree).
"""

KAFKA_VERSION = "4.4.0"
SCALA_VERSION = "2.13"
# Kafka's server jars log through SLF4J; this is the log4j2 backend we put beside them.
LOG4J_VERSION = "2.24.3"
SLF4J_VERSION = "2.0.17"
POSTGRES_IMAGE = "postgres:15"
KAFKA_IMAGE = f"apache/kafka:{KAFKA_VERSION}"
# Toxiproxy, the proxies of `harness up --proxies` (.ci/install-toxiproxy.sh builds
# this version; scripts/build-images.sh builds its image for the compose cluster).
TOXIPROXY_VERSION = "2.5.0"
TOXIPROXY_IMAGE = f"ghcr.io/shopify/toxiproxy:{TOXIPROXY_VERSION}"
