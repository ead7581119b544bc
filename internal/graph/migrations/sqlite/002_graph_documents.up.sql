-- What HTTP sources answered (a .mod, a POM, maven-metadata.xml, a packument), by URL, so that no
-- request of the installation reads a URL twice: proxy and registry content is immutable per URL.
CREATE TABLE graph_documents (
    url    TEXT PRIMARY KEY,
    digest TEXT NOT NULL, -- sha256 of the body, hex
    body   TEXT NOT NULL
);
