// MavenOracle prints the package versions Maven's own resolver (the maven-resolver Maven 3.8 runs,
// with Maven's session defaults: nearest wins, scope and optional rules, ranges, BOM imports) selects
// for a root, reading a repository directory as its local repository, offline. One "g:a@v" a line.
//
//   java -cp '/usr/share/maven/lib/*' MavenOracle.java REPO g:a:v [PLUGIN-DEP-g:a:v …]
//
// With plugin dependencies, the root is a plugin and they are the dependencies a project's POM
// adds to it, resolved as Maven's DefaultPluginDependenciesResolver does (runtime scope).
import java.io.File;
import java.util.*;
import org.apache.maven.repository.internal.MavenRepositorySystemUtils;
import org.eclipse.aether.DefaultRepositorySystemSession;
import org.eclipse.aether.RepositorySystem;
import org.eclipse.aether.artifact.DefaultArtifact;
import org.eclipse.aether.collection.CollectRequest;
import org.eclipse.aether.graph.Dependency;
import org.eclipse.aether.graph.DependencyNode;
import org.eclipse.aether.impl.DefaultServiceLocator;
import org.eclipse.aether.repository.LocalRepository;

public class MavenOracle {
    public static void main(String[] args) throws Exception {
        DefaultServiceLocator loc = MavenRepositorySystemUtils.newServiceLocator();
        RepositorySystem sys = loc.getService(RepositorySystem.class);
        DefaultRepositorySystemSession s = MavenRepositorySystemUtils.newSession();
        s.setLocalRepositoryManager(sys.newLocalRepositoryManager(s, new LocalRepository(new File(args[0]), "simple")));
        s.setOffline(true);
        for (int c = 1; c < args.length; c++) {
            String[] parts = args[c].split("\\|");
            CollectRequest req = new CollectRequest();
            req.setRoot(new Dependency(new DefaultArtifact(parts[0]), parts.length > 1 ? "runtime" : "compile"));
            for (int i = 1; i < parts.length; i++) {
                req.addDependency(new Dependency(new DefaultArtifact(parts[i]), "runtime"));
            }
            DependencyNode root = sys.collectDependencies(s, req).getRoot();
            TreeSet<String> out = new TreeSet<>();
            Deque<DependencyNode> todo = new ArrayDeque<>(List.of(root));
            while (!todo.isEmpty()) {
                DependencyNode n = todo.pop();
                if (n.getArtifact() != null) {
                    out.add(n.getArtifact().getGroupId() + ":" + n.getArtifact().getArtifactId() + "@" + n.getArtifact().getVersion());
                }
                todo.addAll(n.getChildren());
            }
            for (String l : out) {
                System.out.println(args[c] + "\t" + l);
            }
        }
    }
}
