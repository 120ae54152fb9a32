#!/bin/bash
# Build AgentScope Java's real MysqlAgentStateStore and this harness's driver.
#   tools/java_interop/build.sh /path/to/agentscope-java [BUILD_DIR]
# The store and the core classes it uses are compiled from that checkout, as they are; two
# stand-ins (standin/) replace classes the store never calls; nothing of it is kept here.
set -euo pipefail
SRC=${1:?usage: build.sh /path/to/agentscope-java [BUILD_DIR]}
HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=${2:-$HERE/build}
JARS="jackson-databind jackson-core jackson-annotations slf4j-api slf4j-nop mariadb-java-client"
missing=""
command -v javac >/dev/null || missing="openjdk-17-jdk-headless"
for j in $JARS; do [ -e /usr/share/java/$j.jar ] || missing="$missing libjackson2-databind-java libslf4j-java libmariadb-java"; done
if [ -n "$missing" ]; then
    if [ "$(id -u)" = 0 ]; then
        apt-get install -y -q openjdk-17-jdk-headless libjackson2-databind-java libslf4j-java libmariadb-java >/dev/null
    else
        echo "needs: apt-get install openjdk-17-jdk-headless libjackson2-databind-java libslf4j-java libmariadb-java" >&2
        exit 1
    fi
fi
rm -rf "$BUILD" && mkdir -p "$BUILD/src" "$BUILD/classes"
for f in agentscope-extensions/agentscope-extensions-mysql/src/main/java/io/agentscope/extensions/mysql/state/MysqlAgentStateStore.java \
         agentscope-core/src/main/java/io/agentscope/core/state/{AgentStateStore,ListHashUtil,State,VersionedState}.java \
         agentscope-core/src/main/java/io/agentscope/core/util/{JsonUtils,JsonCodec,JacksonJsonCodec,JsonException}.java; do
    rel=${f#*/src/main/java/}
    mkdir -p "$BUILD/src/$(dirname "$rel")"
    cp "$SRC/$f" "$BUILD/src/$rel"
done
# Debian's jackson-databind (2.14) declares IOException where newer ones throw only
# JsonProcessingException (a subclass): catch the wider type, same behaviour.
sed -i 's/catch (JsonProcessingException e)/catch (java.io.IOException e)/' "$BUILD/src/io/agentscope/core/util/JacksonJsonCodec.java"
CP=$(printf '/usr/share/java/%s.jar:' $JARS)
javac -nowarn -d "$BUILD/classes" -cp "$CP" $(find "$BUILD/src" "$HERE/standin" "$HERE/Driver.java" -name '*.java')
echo "$BUILD/classes:$CP" > "$BUILD/classpath"
echo "built $(find "$BUILD/classes" -name '*.class' | wc -l) classes from $SRC ($(git -C "$SRC" rev-parse --short HEAD 2>/dev/null || echo 'not a git checkout')) into $BUILD"
