*** Settings ***
Documentation       Smoke: every node of the testbed answers over SSH and every tool the topology
...                 declares on it answers its version command. Tool versions are in the suite
...                 metadata of log.html.
Resource            ../../resources/testbed.resource
Suite Setup         Set Up Suite Testbed
Suite Teardown      Tear Down Suite Testbed


*** Test Cases ***
Every Node Is Reachable Over SSH
    [Documentation]    A command runs on each node and reports a Linux kernel.
    ${nodes}=    Get Nodes
    FOR    ${node}    IN    @{nodes}
        Node Should Be Reachable    ${node}
    END

Every Declared Tool Answers
    [Documentation]    Each tool in each node's ``tools`` answers its version command.
    ${nodes}=    Get Nodes
    FOR    ${node}    IN    @{nodes}
        ${tools}=    Get Declared Tools    ${node}
        FOR    ${tool}    IN    @{tools}
            ${version}=    Tool Should Answer On Node    ${node}    ${tool}
            Log    ${node}: ${tool} ${version}
        END
    END
